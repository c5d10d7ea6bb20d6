-- The lookup: every index for one probe (see RedisStore._lookup_args for ARGV and
-- RedisStore._parse_lookup for the reply it builds in ``out``).
local have = redis.call('GET', base .. 'p')
if have and have ~= ARGV[1] then return redis.error_reply('DUPFILTER-MISMATCH ' .. have) end
local mkey, digest, hist = ARGV[2], ARGV[3], ARGV[4]
local hsum, window, maxpos = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cap, maxc = tonumber(ARGV[8]), tonumber(ARGV[9])
local min_shared, common_n = tonumber(ARGV[10]), tonumber(ARGV[11])
local function split(packed, width, kind)
  local values, keys = {}, {}
  for j = 1, #packed / width do
    local v = sub(packed, (j - 1) * width + 1, j * width)
    values[j] = v
    if kind then keys[j] = base .. kind .. v end
  end
  return values, keys
end
local sketch, skeys = split(ARGV[12], W_SKETCH, 's')
local _, ckeys = split(ARGV[14], 8, 'k')
local ntail = #ARGV[13] / W_SKETCH
-- On a store of several partitions the client adds up every partition's tail counts.
local all_tails = ARGV[15] == '1'
local hmax = tonumber(ARGV[16])   -- Probe.histogram_limit: at most maxc
local at = 17

local postings = {}
local function newest(key)
  local ids = postings[key]
  if ids == nil then
    ids = redis.call('ZREVRANGE', key, 0, cap - 1)
    postings[key] = ids
  end
  return ids
end
local function postings_of(key)   -- how many ids a posting key holds
  local ids = postings[key]
  if ids and #ids < cap then return #ids end
  return redis.call('ZCARD', key)
end
-- Ids under ``keys`` sharing at least ``floor`` of them, most shared first (ties: first
-- seen), with their counts.
local function ranked(keys, floor)
  local hits, first, out = {}, {}, {}
  for _, key in ipairs(keys) do
    for _, id in ipairs(newest(key)) do
      local c = hits[id]
      if c == nil then first[#first + 1] = id; hits[id] = 1 else hits[id] = c + 1 end
    end
  end
  local pos = {}
  for j, id in ipairs(first) do
    pos[id] = j
    if hits[id] >= floor then out[#out + 1] = id end
  end
  table.sort(out, function(a, b)
    return hits[a] > hits[b] or (hits[a] == hits[b] and pos[a] < pos[b]) end)
  return out, hits
end

local mids = mkey ~= '' and redis.call('ZREVRANGE', base .. 'm' .. mkey, 0, NEWEST_EXACT - 1) or {}
local dids = redis.call('ZREVRANGE', base .. 'g' .. digest, 0, NEWEST_EXACT - 1)

local close, wsize, diffs = {}, 0, {}
if window > 0 then
  local hb = {byte(hist, 1, 36)}
  for s = math.max(0, hsum - window), hsum + window do
    local members = redis.call('ZRANGE', base .. 'h' .. s, 0, -1)
    wsize = wsize + #members
    for _, m in ipairs(members) do
      local diff = 0
      for j = 1, 36 do
        if byte(m, j) ~= hb[j] then
          diff = diff + 1
          if diff > maxpos then break end
        end
      end
      if diff <= maxpos then
        local id = sub(m, 37)
        if diffs[id] == nil or diff < diffs[id] then
          if diffs[id] == nil then close[#close + 1] = id end
          diffs[id] = diff
        end
      end
    end
  end
  -- Closest first, then oldest (ids grow with time), as LMDB.
  local num = {}
  for _, id in ipairs(close) do num[id] = tonumber(id) end
  table.sort(close, function(a, b)
    return diffs[a] < diffs[b] or (diffs[a] == diffs[b] and num[a] < num[b]) end)
end

-- Sketch postings.  One EXISTS first: a candidate must share min_shared hashes, so when
-- fewer of the message's posting keys exist (a new message, mostly), none is read.
local key_of = {}
for j, h in ipairs(sketch) do key_of[h] = skeys[j] end
local existing = #skeys > 0 and redis.call('EXISTS', unpack(skeys)) or 0
local tail = nil
local function tail_hashes()
  if tail == nil then tail = split(ARGV[13], W_SKETCH) end
  return tail
end
local counts = {}   -- tail hash -> postings, where known
local shingles, shits = {}, {}
if existing >= min_shared then
  -- Indexed last-line hashes that many records share are boilerplate: not looked up.
  local common = {}
  for _, h in ipairs(tail_hashes()) do
    local key = key_of[h]
    if key then
      newest(key)
      counts[h] = postings_of(key)
      if counts[h] >= common_n then common[h] = true end
    end
  end
  local index = {}
  for j, h in ipairs(sketch) do if not common[h] then index[#index + 1] = skeys[j] end end
  if #index == 0 then index = skeys end
  shingles, shits = ranked(index, min_shared)
end
local chunks, chits = {}, {}
if #ckeys > 0 and redis.call('EXISTS', unpack(ckeys)) > 0 then chunks, chits = ranked(ckeys, 1) end

-- The candidates' records: one MGET (another only if dead ids leave a list short).
local docs, order, ordered = {}, {}, {}
local function fetch(ids, from, n)
  local keys, pending = {}, {}
  for j = from, math.min(#ids, from + n - 1) do
    local id = ids[j]
    if docs[id] == nil then
      docs[id] = false
      pending[#pending + 1] = id
      keys[#keys + 1] = base .. 'd' .. id
    end
  end
  if #keys == 0 then return end
  local got = redis.call('MGET', unpack(keys))
  for j, id in ipairs(pending) do if got[j] then docs[id] = got[j] end end
end
local wanted = {}
for _, list in ipairs({mids, dids}) do for _, id in ipairs(list) do wanted[#wanted + 1] = id end end
for _, pair in ipairs({{close, hmax}, {shingles, maxc}, {chunks, maxc}}) do
  local list = pair[1]
  for j = 1, math.min(#list, pair[2]) do wanted[#wanted + 1] = list[j] end
end
fetch(wanted, 1, #wanted)
local function keep(id)
  if not ordered[id] then ordered[id] = true; order[#order + 1] = id end
end
local function emit_ids(out, ids)
  local kept = {}
  for _, id in ipairs(ids) do if docs[id] then kept[#kept + 1] = id; keep(id) end end
  out[#out + 1] = #kept
  for _, id in ipairs(kept) do out[#out + 1] = id end
end
local function emit_ranked(out, ids, score, most)
  local kept, j = {}, 1
  while #kept < most and j <= #ids do
    if docs[ids[j]] == nil then fetch(ids, j, most - #kept) end
    if docs[ids[j]] then kept[#kept + 1] = ids[j]; keep(ids[j]) end
    j = j + 1
  end
  out[#out + 1] = #kept
  for _, id in ipairs(kept) do out[#out + 1] = id; out[#out + 1] = score[id] end
end
local out, found = {}, {}
emit_ids(out, mids)
emit_ids(out, dids)
out[#out + 1] = wsize
emit_ranked(out, close, diffs, hmax)
emit_ranked(found, shingles, shits, maxc)
emit_ranked(found, chunks, chits, maxc)
-- Posting counts of the last-line hashes: only worth reading when records are compared.
out[#out + 1] = ntail
if #order == 0 and not all_tails then
  for _ = 1, ntail do out[#out + 1] = 0 end
else
  local others = {}
  for _, h in ipairs(tail_hashes()) do
    if not key_of[h] then others[#others + 1] = base .. 's' .. h end
  end
  local any_other = #others > 0 and redis.call('EXISTS', unpack(others)) > 0
  for _, h in ipairs(tail_hashes()) do
    local n = counts[h]
    if n == nil then
      n = 0
      if key_of[h] then
        if existing > 0 then n = postings_of(key_of[h]) end
      elseif any_other then
        n = redis.call('ZCARD', base .. 's' .. h)
      end
    end
    out[#out + 1] = n
  end
end
for _, v in ipairs(found) do out[#out + 1] = v end
