"""Disclaimers and banners: text an organisation's mail server or template adds to every
message, which says nothing about the message itself.

Two different messages from one company share a long legal disclaimer and often a
"CAUTION: external email" banner; left in, those make them resemble each other more than
their own few lines differ.  They are recognised by what they say — sentences about
confidentiality, intended recipients, external senders — wherever they sit, and set aside
like quoted text.  (Boilerplate the store has seen in many messages is discounted too, by
the detector: see ``Probe.tail_hashes``.)  Pure functions, no I/O.
"""

from __future__ import annotations

import re

# Cheap first test: a text none of these words occur in has no disclaimer or banner.
_TRIGGERS = ("confidential", "intended", "recipient", "disclaimer", "outside", "external",
             "privileged", "environment", "registered", "learn why", "caution", "liab",
             "vertraulich", "confidentiel", "empfänger", "destinataire", "virus")
# One of these alone makes a sentence boilerplate.
_STRONG = re.compile(
    r"intended (?:solely |only |exclusively )?for the (?:use of the )?"
    r"(?:named |intended )?(?:addressee|recipient|person|individual|entity)"
    r"|intended recipient"
    r"|(?:received|got) (?:this|the) (?:e-?mail|message|communication|transmission)[^.]{0,40}"
    r"in error"
    r"|originated (?:from )?outside (?:of )?(?:the|your|our) (?:organi[sz]ation|company|network)"
    r"|(?:came|comes|is) from (?:an? )?(?:external|outside) (?:source|sender)"
    r"|this (?:is an? )?external (?:e-?mail|message|sender)"
    r"|^\s*\[?(?:external|caution|warning)(?: e-?mail| message| sender)?\]?\s*[:\]!-]"
    r"|don'?t often get (?:e-?mail|mail|messages) from"
    r"|learn why this is important"
    r"|do not click (?:on )?links or open attachments"
    r"|please consider the environment before printing"
    r"|^\s*disclaimer\s*[:-]"
    r"|registered (?:office|in england|in scotland|number|company)"
    r"|diese (?:e-?mail|nachricht) (?:enthält|ist) vertraulich"
    r"|falls sie nicht der (?:richtige|beabsichtigte) (?:adressat|empfänger)"
    r"|ce (?:message|courriel|e-?mail) (?:est|et toutes les pièces jointes sont) "
    r"(?:confidentiel|strictement)",
    re.IGNORECASE | re.MULTILINE)
# Two different ones of these make a sentence boilerplate; one extends a neighbour's.
_WEAK = re.compile(
    r"confidential|privileged|proprietary information|unauthori[sz]ed|prohibited"
    r"|dissemination|disclos(?:ure|e)|notify (?:the )?sender|delete (?:it|this|the) "
    r"(?:e-?mail|message|original)|virus(?:es)?|liabilit|liable|accepts? no"
    r"|(?:opinions?|views) (?:expressed|contained)|do not necessarily (?:reflect|represent)"
    r"|addressee|e-?mail transmission|company (?:registration|number|no\b)"
    r"|vat (?:no|number|reg)",
    re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9])")
_BLOCKS = re.compile(r"\n[ \t]*\n")


def _is_boilerplate(sentence: str) -> int:
    """2: boilerplate by itself; 1: a hint (boilerplate next to boilerplate); 0: text."""
    if _STRONG.search(sentence):
        return 2
    hits = {match.group(0).lower()[:6] for match in _WEAK.finditer(sentence)}
    return 2 if len(hits) >= 2 else len(hits)


def split_boilerplate(text: str) -> tuple[str, str]:
    """(text without disclaimers and banners, what was set aside).

    Work is per block (lines between blank lines), per sentence within a block: a sentence
    with a strong cue, or with two weak ones, is boilerplate; so is a sentence with one
    weak cue next to boilerplate.  A block that is all boilerplate goes whole; otherwise
    only its boilerplate sentences go (a banner glued to the first line of the message).
    """
    lowered = text.lower()
    if not any(word in lowered for word in _TRIGGERS):
        return text, ""
    kept: list[str] = []
    aside: list[str] = []
    for block in _BLOCKS.split(text):
        if not block.strip() or not any(word in block.lower() for word in _TRIGGERS):
            kept.append(block)
            continue
        sentences = _SENTENCE_END.split(" ".join(block.split()))
        marks = [_is_boilerplate(sentence) for sentence in sentences]
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
