-- Entry of the write script (after store.lua).  ARGV: params id, retention seconds, index
-- size, partitions, this partition, then ops:
--   c FIELD | t ID WHEN RECIPIENTS | a RECORD | f ID
-- Reply: {1 if the partition's parameter key was (re)created else 0, one result per op}.
params, ret, index_size = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
parts, part = tonumber(ARGV[4]), tonumber(ARGV[5])

local created = bind_parameters()
if type(created) == 'table' then return created end
local out, at = {created}, 6
while at <= #ARGV do
  local op = ARGV[at]
  if op == 'c' then
    redis.call('HINCRBY', base .. 'c', ARGV[at + 1], 1)
    out[#out + 1] = 0
    at = at + 2
  elseif op == 't' then
    out[#out + 1] = touch(ARGV[at + 1], tonumber(ARGV[at + 2]), ARGV[at + 3])
    at = at + 4
  elseif op == 'a' then
    out[#out + 1] = add(ARGV[at + 1])
    at = at + 2
  elseif op == 'f' then
    out[#out + 1] = forget(ARGV[at + 1])
    at = at + 2
  else
    return redis.error_reply('DUPFILTER-BADOP ' .. tostring(op))
  end
end
return out
