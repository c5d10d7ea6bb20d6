-- The write script (after store.lua).  ARGV: params id, retention seconds, index size,
-- partitions, this partition, segment seconds, then ops:
--   c FIELD | t ID WHEN RECIPIENTS | a RECORD POSTINGS BITS | f ID | i ID RECORD and
--   x ID (upgrades)
-- (POSTINGS: the record's postings as the client computed them for segments of BITS.)
-- Reply: {1 if the partition's parameter id was (re)created else 0, one result per op}.
params, ret, index_size = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
parts, part, seg_ms = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]) * 1000
local opened = open_state()
if opened.err then return opened end
local out, at = {state.created}, 7
while at <= #ARGV do
  local op = ARGV[at]
  if op == 'c' then
    redis.call('HINCRBY', base .. 'c', ARGV[at + 1], 1)
    out[#out + 1] = 0
    at = at + 2
  elseif op == 't' then
    out[#out + 1] = touch(p40(tonumber(ARGV[at + 1])), tonumber(ARGV[at + 2]), ARGV[at + 3])
    at = at + 4
  elseif op == 'a' then
    out[#out + 1] = add(ARGV[at + 1], ARGV[at + 2], tonumber(ARGV[at + 3]), true)
    at = at + 4
  elseif op == 'f' then
    out[#out + 1] = forget(p40(tonumber(ARGV[at + 1])))
    at = at + 2
  elseif op == 'x' then
    out[#out + 1] = extend(p40(tonumber(ARGV[at + 1])))
    at = at + 2
  elseif op == 'i' then
    out[#out + 1] = insert(ARGV[at + 2], nil, nil, p40(tonumber(ARGV[at + 1])))
    at = at + 3
  else
    return redis.error_reply('DUPFILTER-BADOP ' .. tostring(op))
  end
end
return out
