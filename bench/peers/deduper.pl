#!/usr/bin/perl
# Peer for bench/throughput.py: the seed's Text::DeDuper dedup loop over a list of mail files.
#
# Usage: perl -I LIBDIR deduper.pl LISTFILE
# LISTFILE names one message file per line. Each body (everything after the first blank line)
# is checked with find_similar and, when nothing similar is known, added with add_doc, as in
# the module's SYNOPSIS. Prints "messages N" and "similar N" (bodies with a find_similar hit).
use strict;
use warnings;

use Text::DeDuper;

my $list = shift @ARGV or die "usage: $0 LISTFILE\n";
open(my $names, '<', $list) or die "cannot read $list: $!\n";

my $deduper = Text::DeDuper->new();
my ($messages, $similar) = (0, 0);
while (my $path = <$names>)
{
    chomp $path;
    open(my $fh, '<:raw', $path) or die "cannot read $path: $!\n";
    my $raw = do { local $/; <$fh> };
    close($fh);

    my $body = $raw =~ /\n\r?\n(.*)\z/s ? $1 : '';
    $messages++;
    if ($deduper->find_similar($body))
    {
        $similar++;
        next;
    }
    $deduper->add_doc($messages, $body);
}
close($names);
print "messages $messages\nsimilar $similar\n";
