"""Disclaimers and banners: text an organisation's mail server or template adds to every
message, which says nothing about the message itself.

Two different messages from one company share a long legal disclaimer and often a
"CAUTION: external email" banner; left in, those make them resemble each other more than
their own few lines differ.  They are recognised by what they say — sentences about
confidentiality, intended recipients, external senders — wherever they sit, and set aside
like quoted text.  (Boilerplate the store has seen in many messages is discounted too, by
the detector: see ``Probe.tail_hashes``.)  Pure functions, no I/O.

Every cue is a literal word first (found by the one keyword scan of the text,
mailfilter/text.py) and a small regular expression second, compiled on first use and tried
only where its word occurs: one pattern of every cue over every text cost more than parsing
the message.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate
from operator import add

from mailfilter.text import Pattern, Prepared, prepare, register

# A strong cue makes a sentence boilerplate by itself: (word it needs, pattern).
_STRONG = tuple((anchor, Pattern(pattern, re.MULTILINE)) for anchor, pattern in (
    ("intended", r"intended (?:solely |only |exclusively )?for (?:the )?(?:use of (?:the )?)?"
                 r"(?:named |intended )?(?:addressee|recipient|person|individual|entity)"
                 r"|intended (?:solely|only|exclusively) for|intended recipient"
                 r"|(?:not|be) the (?:intended|named) (?:recipient|addressee)"),
    ("in error", r"(?:received|got) (?:this|the) (?:e-?mail|message|communication"
                 r"|transmission)[^.]{0,40}in error"),
    ("by mistake", r"(?:received|got) (?:this|the) (?:e-?mail|message|communication"
                   r"|transmission)[^.]{0,40}by mistake"),
    ("purposes only", r"for information(?:al)? purposes only"),
    ("confidential", r"this (?:e-?mail|message|communication)(?: and any (?:attachments?"
                     r"|files?)[^.]{0,40})? (?:is|are|may be|contains?) (?:strictly )?"
                     r"confidential"),
    ("privileged", r"this (?:e-?mail|message|communication)(?: and any (?:attachments?"
                   r"|files?)[^.]{0,40})? (?:is|are|may be|contains?) privileged"),
    ("outside", r"originated (?:from )?outside (?:of )?[\w' ]{0,30}(?:organi[sz]ation"
                r"|company|network|domain|institution|university|firm|enterprise)"
                r"|(?:came|comes|is|was sent) from outside (?:your|the|our)"),
    ("external", r"(?:came|comes|is|was sent) from an? external (?:source|sender|party)"
                 r"|this (?:is an? )?external (?:e-?mail|message|sender)"
                 r"|^\W{0,3}external\b[^.\n]{0,25}[:\]!-]"),
    ("caution", r"^\W{0,3}caution\b[^.\n]{0,25}[:\]!-][^\n]{0,200}?(?:external|outside|sender"
                r"|links|attachments|phishing)|use caution when (?:clicking|opening)"),
    ("warning", r"^\W{0,3}warning\b[^.\n]{0,25}[:\]!-][^\n]{0,200}?(?:external|outside|sender"
                r"|links|attachments|phishing)"),
    ("attention", r"^\W{0,3}attention\b[^.\n]{0,25}[:\]!-][^\n]{0,200}?(?:external|outside"
                  r"|sender|links|attachments|phishing)"),
    ("often get", r"don'?t often get (?:e-?mail|mail|messages) from"),
    ("learn why", r"learn why this is important"),
    ("do not click", r"do not click (?:on )?links or open attachments"),
    ("report", r"report (?:suspicious|phishing)"),
    ("careful", r"be careful with this message"),
    ("before printing", r"consider the environment before printing"),
    ("disclaimer", r"^\W{0,3}disclaimer\s*[:-]"),
    ("registered", r"registered (?:office|in england|in scotland|in ireland|number|company)"),
    ("gesellschaft", r"sitz der gesellschaft"),
    ("hrb", r"amtsgericht [\w-]+,? hrb|\bhrb \d"),
    ("vertraulich", r"diese (?:e-?mail|nachricht) (?:enthält|ist) vertraulich"),
    ("sie nicht der", r"(?:falls|wenn) sie nicht der (?:richtige|beabsichtigte|vorgesehene) "
                      r"(?:adressat|empfänger)"),
    ("irrtümlich", r"irrtümlich erhalten"),
    ("confidentiel", r"ce (?:message|courriel|e-?mail) (?:est|et toutes les pièces jointes "
                     r"sont) (?:confidentiel|strictement)"),
    ("si vous", r"si vous (?:avez reçu ce|n'êtes pas le destinataire)"),
    ("destinatario", r"si usted no es el destinatario"),
    ("confidencial", r"este (?:mensaje|correo) (?:es|y sus anexos son) confidencial"),
    ("circular 230", r"circular 230"),
    ("tax advice", r"tax advice contained in this (?:communication|e-?mail|message)"),
    ("secure", r"(?:internet|e-?mail) (?:communications? )?(?:is|are) not (?:a )?secure"),
    ("above named", r"intended (?:only |solely )?for the above named"),
    ("[ext", r"^\[ext(?:ernal)?\]"),
    ("legal responsibility", r"(?:accept|assume)s? (?:no )?legal responsibility"),
    ("scanned", r"(?:e-?mail|message) has been scanned for viruses"),
    ("authorised and", r"(?:authori[sz]ed and regulated|regulated by the financial)"),
    ("destinataires", r"l'intention exclusive de (?:ses|son) destinataire"),
    ("par erreur", r"(?:reçu|recevez) ce (?:message|courriel) par erreur"),
    ("personal data", r"process (?:your )?personal data in accordance with"),
    ("first-time sender", r"^\W{0,3}first-time sender\b"),
    # Notification footers of trackers and forges (GitHub, GitLab, Bugzilla, Jira): the
    # same lines under every notice, however different their news.
    ("directly", r"reply to this e-?mail directly"),
    ("receiving this", r"you(?: are|'re) receiving this (?:because you|e-?mail because of"
                       r"|mail because:)"),
    ("atlassian", r"this message was sent by atlassian"),
    ("the bug", r"^\W{0,3}you (?:are|reported)\b[^.\n]{0,50}\bthe bug\.?$"),
    ("message id", r"^\W{0,3}message id: <[^>\s]{1,200}@github\.com>"),
))
# Weak cues: two different ones make a sentence boilerplate; one extends a neighbour's.
_WEAK = ("confidential", "privileged", "proprietary information", "unauthori", "prohibited",
         "dissemination", "disclos", "notify the sender", "notify sender", "delete this",
         "delete it", "delete the e", "delete the message", "virus", "liabilit", "liable",
         "accept no", "accepts no", "does not accept", "opinions expressed",
         "views expressed", "opinions contained", "views contained", "do not necessarily",
         "addressee", "e-mail transmission", "email transmission", "company registration",
         "company number", "company no", "vat no", "vat number", "vat reg", "solicitation",
         "errors or omissions", "monitored", "recommendation", "subject to the terms",
         "legally binding", "vertraulich", "unbefugt", "unerlaubt", "geschäftsführer",
         "destinataire", "strictement interdit", "destinatario",
         # what a banner's or disclaimer's other sentences say, next to its cue
         "property of", "open attachments", "links and attachments", "links or attachments",
         "unknown sender", "responsibility", "regulated", "opinions presented",
         "views presented", "bank details", "privacy notice", "privacy policy", "precautions",
         "in error")
# Words at least one of which every disclaimer or banner above holds: a text with none of
# them is left alone after a handful of substring tests (most mail).
_GATE = register(("confidential", "intended", "recipient", "disclaimer", "originated", "external",
         "caution", "often get", "registered", "before printing", "vertraulich",
         "confidentiel", "destinat", "adressat", "privileged", "outside your",
         "outside of", "outside the", "careful with", "gesellschaft", "confidencial",
         "directly", "receiving this", "atlassian", "the bug", "message id",
         "circular 230", "tax advice", "secure", "above named", "[ext",
         "legal responsibility", "scanned",
         "authorised and", "destinataires", "par erreur", "personal data",
         "first-time sender"))
register(_WEAK)
_ANCHORS = tuple(dict.fromkeys(anchor for anchor, _pattern in _STRONG))
register(_ANCHORS)
_SENTENCE_END = Pattern(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
_BLOCKS = Pattern(r"\n[ \t]*\n")
_TAG_LINE_WORDS = 8        # a banner on its own line is short: "[EXTERNAL]", "CAUTION: …"


_Cues = tuple[tuple[str, Pattern], ...]


def _strong(lowered: str, cues: _Cues = _STRONG) -> bool:
    return any(anchor in lowered and pattern.get().search(lowered) for anchor, pattern in cues)


def _weak_cues(lowered: str, cues: tuple[str, ...] = _WEAK) -> int:
    return sum(1 for word in cues if word in lowered)


def _is_boilerplate(sentence: str, strong: _Cues,
                    weak: tuple[str, ...], block_weak: int) -> int:
    """2: boilerplate by itself; 1: a hint (boilerplate next to boilerplate); 0: text.

    Two weak cues decide alone only in a block that holds a third: a writer's own "they
    are confidential, please do not disclose them" has two, a disclaimer has more."""
    lowered = sentence.lower()
    if _strong(lowered, strong):
        return 2
    cues = _weak_cues(lowered, weak)
    if cues >= 3 or (cues == 2 and block_weak >= 3):
        return 2
    return min(cues, 1)


def _units(block: str, strong: _Cues) -> list[str]:
    """The sentences of a block, a short tag line ("[EXTERNAL]", "CAUTION: External
    sender") standing alone even with the note right under it (no blank line)."""
    lines = block.split("\n")
    units: list[str] = []
    pending: list[str] = []
    for line in lines:
        if 0 < len(line.split()) <= _TAG_LINE_WORDS and _strong(line.lower(), strong):
            if pending:
                units.extend(_SENTENCE_END.get().split(" ".join(" ".join(pending).split())))
                pending = []
            units.append(" ".join(line.split()))
        else:
            pending.append(line)
    if pending:
        units.extend(_SENTENCE_END.get().split(" ".join(" ".join(pending).split())))
    return [unit for unit in units if unit]


def _flag_neighbours(marks: list[int]) -> list[bool]:
    """Which sentences go: those boilerplate by themselves (mark 2), and those with one
    weak cue (mark 1) in an unbroken run of cue-holding sentences that has one of them —
    what flagging each hint next to a flagged sentence until nothing changes gives, in
    one pass each way instead of one pass per sentence added."""
    flagged = [mark == 2 for mark in marks]
    for order in (range(len(marks)), range(len(marks) - 1, -1, -1)):
        carry = False
        for index in order:
            if flagged[index]:
                carry = True
            elif marks[index] == 1 and carry:
                flagged[index] = True
            else:
                carry = False
    return flagged


def split_boilerplate(text: str, prepared: Prepared | None = None) -> tuple[str, str]:
    """(text without disclaimers and banners, what was set aside).

    Work is per block (lines between blank lines), per sentence within a block: a sentence
    with a strong cue, or with two weak ones, is boilerplate; so is a sentence with one
    weak cue next to boilerplate.  A block that is all boilerplate goes whole; otherwise
    only its boilerplate sentences go (a banner glued to the first line of the message).
    ``prepared``: ``text`` prepared already (mailfilter/text.py).
    """
    prepared = prepare(text, (prepared,))
    if not prepared.any(_GATE):
        return text, ""
    # Only the cues the text holds at all are tried on its blocks and sentences.
    anchors = set(prepared.present(_ANCHORS))
    strong = tuple(cue for cue in _STRONG if cue[0] in anchors)
    weak = tuple(prepared.present(_WEAK))
    if not strong and len(weak) < 2:
        return text, ""
    blocks = _BLOCKS.get().split(text)
    kept: list[str | None] = list(blocks)
    aside: list[str] = []
    for index in _cue_blocks(prepared, blocks, strong, weak):
        block = blocks[index]
        lowered = block.lower()
        if not block.strip() or not (_strong(lowered, strong)
                                     or _weak_cues(lowered, weak) >= 2):
            continue
        sentences = _units(block, strong)
        block_weak = _weak_cues(lowered, weak)
        marks = [_is_boilerplate(sentence, strong, weak, block_weak) for sentence in sentences]
        flagged = _flag_neighbours(marks)
        if not any(flagged):
            continue
        if all(flagged):
            kept[index] = None
            aside.append(block)
        else:
            kept[index] = " ".join(s for s, f in zip(sentences, flagged, strict=True) if not f)
            aside.append(" ".join(s for s, f in zip(sentences, flagged, strict=True) if f))
    if not aside:
        return text, ""
    return "\n\n".join(block for block in kept if block is not None), "\n\n".join(aside)


def _cue_blocks(prepared: Prepared, blocks: list[str], strong: _Cues,
                weak: tuple[str, ...]) -> Iterable[int]:
    """Indexes (ascending) of the blocks where one of the cues was found: the others
    hold no boilerplate and are not read again (offsets of the lower-case copy are the
    text's when lowering kept them; else every block is read)."""
    if not prepared.aligned:
        return range(len(blocks))
    text = prepared.text
    separators = _BLOCKS.get().findall(text)
    starts = [0, *accumulate(map(add, map(len, blocks), map(len, separators)))]
    found = prepared.starts([cue[0] for cue in strong] + list(weak))
    return sorted({bisect_right(starts, at) - 1 for at in found})
