"""``attachments``: the same attachment is the same message when attachments are most of
both messages' bytes, whatever the cover notes say (seed 004's length-weighted chunk
similarity for attachments that are alike but not the same bytes)."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName, shared_attachment


class AttachmentsRule:
    name = RuleName.ATTACHMENTS
    description = ("the same attachment (same bytes, or chunk similarity at or above "
                   "attachment_threshold) when attachments are at least attachment_share "
                   "of both messages' bytes; inline images and attachments under 1 KiB "
                   "never decide (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        settings = pair.settings
        if pair.same_text or min(new.attachment_share,
                                 stored.attachment_share) < settings.attachment_share:
            return None
        shared = shared_attachment(new, stored)
        if shared is not None:
            return Judgement(NEAR_DUPLICATE, self.name, "attachments", 1.0,
                             f"same attachment {shared.name or '(no name)'} "
                             f"({shared.size} bytes)", shared)
        similarity = pair.attachment_similarity
        if similarity is not None and similarity >= settings.attachment_threshold:
            largest = new.attachments[0] if new.attachments else None
            return Judgement(NEAR_DUPLICATE, self.name, "attachments", similarity,
                             f"attachment chunks {similarity:.2f} alike", largest)
        return None
