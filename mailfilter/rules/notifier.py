"""``notifier``: a tracker's notifications (GitHub, GitLab, Jira, Bugzilla) come from one
address for everyone who acts; its display name names who did.  The same words from
another person ("+1", "Bump.", "Closed as completed") are another event, however alike
the texts.  And a tracker sends each event once: its notification again is the same text
(or the same Message-ID); one with other words is the next event, however little it
says above the issue it quotes ("Closed as completed", then "Can reproduce on staging"),
and however alike the rest ("Status: Open -> Reopened", then "Reopened -> Closed" over a
long description: 0.95 alike).  The same words linking another comment id are the same
person's comment posted again ("Assigning to the platform team." twice), another event.
And a tracker's notification is never a copy of a message from outside it: an issue whose
description quotes a mail (a list post pasted into a ticket) made the notification 0.36–
0.47 alike to that mail (a forward of a notification, the other way round, is a copy).
Other programs' reports (cron, Auto-Submitted alone) are left to rule identifiers and
automated_threshold."""

from __future__ import annotations

from mailfilter.rules.pair import Judgement, Pair, RuleName


class NotifierRule:
    name = RuleName.NOTIFIER
    description = ("a tracker's or program's notification (X-GitHub-*, X-JIRA-*, "
                   "Auto-Submitted …) from the same address under another person's name, "
                   "or with another text, or the same text for another comment: another "
                   "action; a tracker's notification like mail from outside it: its own "
                   "event (unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if new.tracker and not stored.notifier and not pair.same_text:
            return Judgement(rule=self.name,
                             note="a tracker's notification like a message from outside "
                                  "it: the tracker's own event, not a copy")
        if not (new.notifier and stored.notifier and new.sender
                and new.sender == stored.sender):
            return None
        if new.sender_name and stored.sender_name and new.sender_name != stored.sender_name:
            return Judgement(rule=self.name,
                             note="a notification of the same service for another person")
        if pair.same_text and new.event and stored.event and new.event != stored.event:
            return Judgement(rule=self.name,
                             note="the same words from a tracker for another comment: "
                                  "posted again")
        if not pair.same_text and (new.tracker and stored.tracker
                                   or not (new.automated and stored.automated)):
            # (A program's reports: rule identifiers names the figures that changed.)
            return Judgement(rule=self.name,
                             note="a notification of the same service with other words: "
                                  "the next event")
        return None
