-- The lookup-or-add script's end (after find.lua and store.lua).  ARGV: the lookup's, then
-- retention, index size, partitions, partition, segment seconds, the counter field, a
-- record, how many of the lookup's first keys are postings of the record (they are not sent
-- again) and its other postings (each its field for the width sent with the lookup, then
-- its key; '' when the width was not known: the record is read).  When the lookup found no
-- record at all (so the
-- verdict can only be "unique"), the record is added and the verdict counted: one round
-- trip for a new message.  The reply is the lookup's plus the new id (0: nothing was
-- added; negative: added, and the partition's parameter id was created).
ret, index_size = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
parts, part, seg_ms = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]) * 1000
local counter_field, record = ARGV[at + 5], ARGV[at + 6]
local reuse, record_postings = tonumber(ARGV[at + 7]), ARGV[at + 8]
params = ARGV[1]

local added = 0
if not could_match then
  local opened = open_state()
  if opened.err then return opened end
  redis.call('HINCRBY', base .. 'c', counter_field, 1)
  -- Nothing has this digest (the lookup would have found it): no sighting to check for.
  added = add(record, record_postings, sent_bits, false, reuse)
  if state.created == 1 then added = -added end
end

out[#out + 1] = #order
for _, id in ipairs(order) do out[#out + 1] = u40(id, 0); out[#out + 1] = docs[id] end
out[#out + 1] = added
return out
