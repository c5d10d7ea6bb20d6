-- Entry of the lookup-or-add script (after find.lua and store.lua).  ARGV: the lookup's,
-- then retention, index size, partitions, partition, counter field and a record.  When the
-- lookup found no record at all (so the verdict can only be "unique"), the record is added
-- and the verdict counted: one round trip for a new message.  The reply is the lookup's
-- plus the new id (0: nothing was added; negative: added, and the partition's parameter
-- key was created).
ret, index_size = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
parts, part = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
local field, record = ARGV[at + 4], ARGV[at + 5]
params = ARGV[1]

local added = 0
if #order == 0 then
  local bound = bind_parameters()
  if type(bound) == 'table' then return bound end
  redis.call('HINCRBY', base .. 'c', field, 1)
  added = add(record)
  if bound == 1 then added = -added end
end

out[#out + 1] = #order
for _, id in ipairs(order) do out[#out + 1] = id; out[#out + 1] = docs[id] end
out[#out + 1] = added
return out
