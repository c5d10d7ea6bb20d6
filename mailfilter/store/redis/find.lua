-- The lookup: every index of one partition for one probe, in one pass over its segments.
-- ARGV (see RedisStore._lookup_args): params id, Message-ID key or '', digest, histogram,
-- sum, window, max positions, posting cap, max candidates, min shared, common threshold (a
-- last-line hash with this many postings here is boilerplate), then the sketch hashes, the
-- tail hashes and the chunk digests (each list one string of fixed-width values), 1 when the
-- store has several partitions, the most histogram candidates, how far to count a tail
-- hash's postings, and the probe's histogram group keys (4 bytes each; '' to read the
-- whole sum window instead).  It builds ``out`` (see RedisStore._parse_lookup), ``order``
-- (the ids of the records returned) and ``docs`` (id -> record).
--
-- Every redis.call and every string a script makes costs a microsecond or more: each
-- segment is read with one HMGET of the fields the probe's keys fall in, the records of all
-- candidates of a segment with one more, and the postings of the last-line hashes that are
-- not in the index only when a record is returned.
local mkey, digest, hist = ARGV[2], ARGV[3], ARGV[4]
local hsum, window, maxpos = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cap, maxc = tonumber(ARGV[8]), tonumber(ARGV[9])
local min_shared, common_n = tonumber(ARGV[10]), tonumber(ARGV[11])
local sketch, tails = split(ARGV[12], W_SKETCH), split(ARGV[13], W_SKETCH)
local chunk_keys = split(ARGV[14], W_CHUNK_DIGEST)
-- On a store of several partitions the client adds up every partition's tail counts.
local all_tails = ARGV[15] == '1'
local hmax = tonumber(ARGV[16])   -- Probe.histogram_limit: at most maxc
local count_limit = tonumber(ARGV[17])
local group_keys = split(ARGV[18], 4)
local at = 19

local meta = redis.call('HMGET', base .. 'c', 'p', 'segs')
if meta[1] and meta[1] ~= ARGV[1] then
  return redis.error_reply('DUPFILTER-MISMATCH ' .. meta[1])
end
local segs = segments(meta[2])

-- What to read: one "want" per probe key, filled segment by segment (newest first) with the
-- ids under the key, up to its limit.  where[id]: the segment holding the record.
local wants, where = {}, {}
local function want(kind, key, limit)
  local w = {kind = kind, key = key, left = limit, ids = {}}
  wants[#wants + 1] = w
  return w
end
local function read(list)
  for _, seg in ipairs(segs) do
    local fields, slot = {}, {}
    for _, w in ipairs(list) do
      w.slot = nil
      if w.left > 0 then
        local f = field(w.kind, w.key, seg.bits)
        if slot[f] == nil then fields[#fields + 1] = f; slot[f] = #fields end
        w.slot = slot[f]
      end
    end
    if #fields > 0 then
      local values = redis.call('HMGET', seg.key, unpack(fields))
      for _, w in ipairs(list) do
        local value = w.slot and values[w.slot]
        if value then
          local from = #w.ids + 1
          w.left = w.left - entries(value, w.key, w.left, w.ids)
          for j = from, #w.ids do
            local id = w.ids[j]
            if where[id] == nil then where[id] = seg.key end
          end
        end
      end
    end
  end
end

local wm = mkey ~= '' and want('m', mkey, NEWEST_EXACT) or {ids = {}}
local wg = want('g', digest, NEWEST_EXACT)
-- The histogram rule: records under the probe's group keys (each within the window and
-- the positions it allows shares at least one), or every record in the sum window.
local hwants = {}
if window > 0 then
  if #group_keys > 0 then
    for j, key in ipairs(group_keys) do
      local w = want('h', key, 1e15)
      w.group = (j - 1) % HISTOGRAM_GROUPS
      w.sum = math.max(0, hsum - window) + floor((j - 1) / HISTOGRAM_GROUPS)
      hwants[#hwants + 1] = w
    end
  else
    for s = math.max(0, hsum - window), math.min(65535, hsum + window) do
      hwants[#hwants + 1] = want('H', p16(s), 1e15)
    end
  end
end
-- Sketch hashes: the newest ``cap`` ids each; a last-line hash is read further, up to
-- ``count_limit``, since how many records share it says whether it is boilerplate.
local is_tail = {}
for _, h in ipairs(tails) do is_tail[h] = true end
local swants, by_hash = {}, {}
for j, h in ipairs(sketch) do
  local limit = cap
  if is_tail[h] and count_limit > 0 then limit = math.max(cap, count_limit) end
  swants[j] = want('s', h, limit)
  by_hash[h] = swants[j]
end
local kwants = {}
for j, c in ipairs(chunk_keys) do kwants[j] = want('k', c, cap) end
read(wants)

-- Ids under ``list``'s keys (the first ``cap`` of each) sharing at least ``least`` of them,
-- most shared first (ties: first seen), with their counts.
local function ranked(list, least)
  local hits, first, out = {}, {}, {}
  for _, w in ipairs(list) do
    for j = 1, math.min(#w.ids, cap) do
      local id = w.ids[j]
      local c = hits[id]
      if c == nil then first[#first + 1] = id; hits[id] = 1 else hits[id] = c + 1 end
    end
  end
  local pos = {}
  for j, id in ipairs(first) do
    pos[id] = j
    if hits[id] >= least then out[#out + 1] = id end
  end
  table.sort(out, function(a, b)
    return hits[a] > hits[b] or (hits[a] == hits[b] and pos[a] < pos[b]) end)
  return out, hits
end

-- Indexed last-line hashes that many records share are boilerplate: not looked up (unless
-- nothing else is left).
local index = {}
for j, h in ipairs(sketch) do
  if not (is_tail[h] and #swants[j].ids >= common_n) then index[#index + 1] = swants[j] end
end
if #index == 0 then index = swants end
local shingles, shits = ranked(index, min_shared)
local chunks, chits = ranked(kwants, 1)

-- The records: one HMGET per segment for the ids wanted; ``fetch`` brings those not read yet.
local docs = {}
local function fetch(ids)
  local by_seg = {}
  for _, id in ipairs(ids) do
    if docs[id] == nil and where[id] then
      docs[id] = false
      local list = by_seg[where[id]]
      if list == nil then list = {}; by_seg[where[id]] = list end
      list[#list + 1] = id
    end
  end
  for key, list in pairs(by_seg) do
    local fields = {}
    for j, id in ipairs(list) do fields[j] = 'd' .. id end
    local got = redis.call('HMGET', key, unpack(fields))
    for j, id in ipairs(list) do if got[j] then docs[id] = got[j] end end
  end
end

-- The histogram rule: every record found compared bin by bin (with the group keys, only
-- those whose group really is the probed one: a key number can be shared by chance).
local close, diffs, wsize = {}, {}, 0
if window > 0 then
  local hids, seen = {}, {}
  for _, w in ipairs(hwants) do
    for _, id in ipairs(w.ids) do
      if not seen[id] then seen[id] = true; hids[#hids + 1] = id end
    end
  end
  fetch(hids)
  local hb = {byte(hist, 1, 36)}
  local counted = {}
  local function compare(id)
    local data = docs[id]
    if not data or counted[id] then return end
    counted[id] = true
    wsize = wsize + 1
    local diff = 0
    for j = 1, 36 do
      if byte(data, O_HISTOGRAM + j) ~= hb[j] then
        diff = diff + 1
        if diff > maxpos then return end
      end
    end
    diffs[id] = diff
    close[#close + 1] = id
  end
  for _, w in ipairs(hwants) do
    for _, id in ipairs(w.ids) do
      local data = docs[id]
      if data and w.group then
        local same = u16(data, O_HISTOGRAM_SUM) == w.sum
        for j = w.group + 1, 36, HISTOGRAM_GROUPS do
          if not same then break end
          same = byte(data, O_HISTOGRAM + j) == hb[j]
        end
        if same then compare(id) end
      elseif data then
        compare(id)
      end
    end
  end
  -- Closest first, then oldest (ids grow with time), as LMDB.
  local num = {}
  for _, id in ipairs(close) do num[id] = u40(id, 0) end
  table.sort(close, function(a, b)
    return diffs[a] < diffs[b] or (diffs[a] == diffs[b] and num[a] < num[b]) end)
end

local wanted = {}
for _, list in ipairs({wm.ids, wg.ids}) do
  for _, id in ipairs(list) do wanted[#wanted + 1] = id end
end
for _, pair in ipairs({{shingles, maxc}, {chunks, maxc}}) do
  for j = 1, math.min(#pair[1], pair[2]) do wanted[#wanted + 1] = pair[1][j] end
end
fetch(wanted)

local order, ordered = {}, {}
local function keep(id)
  if not ordered[id] then ordered[id] = true; order[#order + 1] = id end
end
local function emit_ids(out, ids)
  local kept = {}
  for _, id in ipairs(ids) do if docs[id] then kept[#kept + 1] = id; keep(id) end end
  out[#out + 1] = #kept
  for _, id in ipairs(kept) do out[#out + 1] = u40(id, 0) end
end
local function emit_ranked(out, ids, score, most)
  local kept = {}
  for j = 1, #ids do
    if #kept >= most then break end
    if docs[ids[j]] then kept[#kept + 1] = ids[j]; keep(ids[j]) end
  end
  out[#out + 1] = #kept
  for _, id in ipairs(kept) do out[#out + 1] = u40(id, 0); out[#out + 1] = score[id] end
end
local out, found = {}, {}
emit_ids(out, wm.ids)
emit_ids(out, wg.ids)
out[#out + 1] = wsize
emit_ranked(out, close, diffs, hmax)
emit_ranked(found, shingles, shits, maxc)
emit_ranked(found, chunks, chits, maxc)

-- Posting counts of the last-line hashes (up to count_limit): only worth reading when
-- records are compared (with several partitions always: the client adds them up).
out[#out + 1] = #tails
if #order == 0 and not all_tails then
  for _ = 1, #tails do out[#out + 1] = 0 end
else
  local others = {}
  for _, h in ipairs(tails) do
    if not by_hash[h] then
      local w = {kind = 's', key = h, left = count_limit, ids = {}}
      others[#others + 1] = w
      by_hash[h] = w
    end
  end
  if #others > 0 and count_limit > 0 then read(others) end
  for _, h in ipairs(tails) do out[#out + 1] = math.min(#by_hash[h].ids, count_limit) end
end
for _, v in ipairs(found) do out[#out + 1] = v end
