"""Disclaimers and banners: text an organisation's mail server or template adds to every
message, which says nothing about the message itself.

Two different messages from one company share a long legal disclaimer and often a
"CAUTION: external email" banner; left in, those make them resemble each other more than
their own few lines differ.  They are recognised by what they say — sentences about
confidentiality, intended recipients, external senders — wherever they sit, and set aside
like quoted text.  (Boilerplate the store has seen in many messages is discounted too, by
the detector: see ``Probe.tail_hashes``.)  Pure functions, no I/O.

Every cue is a literal word first (a substring test, fast) and a small regular expression
second, tried only where its word occurs: one pattern of every cue over every text cost
more than parsing the message.
"""

from __future__ import annotations

import re

# A strong cue makes a sentence boilerplate by itself: (word it needs, pattern).
_STRONG = tuple((anchor, re.compile(pattern, re.MULTILINE)) for anchor, pattern in (
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
         "destinataire", "strictement interdit", "destinatario")
# Words at least one of which every disclaimer or banner above holds: a text with none of
# them is left alone after a handful of substring tests (most mail).
_GATE = ("confidential", "intended", "recipient", "disclaimer", "originated", "external",
         "caution", "often get", "registered", "before printing", "vertraulich",
         "confidentiel", "destinat", "adressat", "privileged", "outside your",
         "outside of", "outside the", "careful with", "gesellschaft", "confidencial")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
_BLOCKS = re.compile(r"\n[ \t]*\n")
_TAG_LINE_WORDS = 8        # a banner on its own line is short: "[EXTERNAL]", "CAUTION: …"


def _strong(lowered: str, cues: tuple[tuple[str, re.Pattern[str]], ...] = _STRONG) -> bool:
    return any(anchor in lowered and pattern.search(lowered) for anchor, pattern in cues)


def _weak_cues(lowered: str, cues: tuple[str, ...] = _WEAK) -> int:
    return sum(1 for word in cues if word in lowered)


def _is_boilerplate(sentence: str, strong: tuple[tuple[str, re.Pattern[str]], ...],
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


def _units(block: str, strong: tuple[tuple[str, re.Pattern[str]], ...]) -> list[str]:
    """The sentences of a block, a short tag line ("[EXTERNAL]", "CAUTION: External
    sender") standing alone even with the note right under it (no blank line)."""
    lines = block.split("\n")
    units: list[str] = []
    pending: list[str] = []
    for line in lines:
        if 0 < len(line.split()) <= _TAG_LINE_WORDS and _strong(line.lower(), strong):
            if pending:
                units.extend(_SENTENCE_END.split(" ".join(" ".join(pending).split())))
                pending = []
            units.append(" ".join(line.split()))
        else:
            pending.append(line)
    if pending:
        units.extend(_SENTENCE_END.split(" ".join(" ".join(pending).split())))
    return [unit for unit in units if unit]


def split_boilerplate(text: str) -> tuple[str, str]:
    """(text without disclaimers and banners, what was set aside).

    Work is per block (lines between blank lines), per sentence within a block: a sentence
    with a strong cue, or with two weak ones, is boilerplate; so is a sentence with one
    weak cue next to boilerplate.  A block that is all boilerplate goes whole; otherwise
    only its boilerplate sentences go (a banner glued to the first line of the message).
    """
    lowered_text = text.lower()
    if not any(word in lowered_text for word in _GATE):
        return text, ""
    # Only the cues the text holds at all are tried on its blocks and sentences.
    strong = tuple(cue for cue in _STRONG if cue[0] in lowered_text)
    weak = tuple(word for word in _WEAK if word in lowered_text)
    if not strong and len(weak) < 2:
        return text, ""
    kept: list[str] = []
    aside: list[str] = []
    for block in _BLOCKS.split(text):
        lowered = block.lower()
        if not block.strip() or not (_strong(lowered, strong)
                                     or _weak_cues(lowered, weak) >= 2):
            kept.append(block)
            continue
        sentences = _units(block, strong)
        block_weak = _weak_cues(lowered, weak)
        marks = [_is_boilerplate(sentence, strong, weak, block_weak) for sentence in sentences]
        flagged = [mark == 2 for mark in marks]
        changed = True
        while changed:   # one weak cue next to boilerplate is boilerplate too
            changed = False
            for index, mark in enumerate(marks):
                if mark == 1 and not flagged[index] and (
                        (index > 0 and flagged[index - 1])
                        or (index + 1 < len(marks) and flagged[index + 1])):
                    flagged[index] = changed = True
        if not any(flagged):
            kept.append(block)
        elif all(flagged):
            aside.append(block)
        else:
            kept.append(" ".join(s for s, f in zip(sentences, flagged, strict=True) if not f))
            aside.append(" ".join(s for s, f in zip(sentences, flagged, strict=True) if f))
    if not aside:
        return text, ""
    return "\n\n".join(kept), "\n\n".join(aside)
