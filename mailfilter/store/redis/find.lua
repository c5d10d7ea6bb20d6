-- The lookup: every posting one query names, in one pass over the partition's segments, and
-- the records they list.  It ranks nothing: the detector does that, in Python, for every
-- backend alike.  ARGV (see RedisStore._lookup_args): params id, Message-ID key or '',
-- digest, histogram, sum, window, max positions, newest ids per sketch hash and chunk, per
-- Message-ID and digest, per part digest, the most histogram matches, then the sketch
-- hashes looked up, the hashes only counted and the chunk digests (each list one string
-- of fixed-width values), where counts stop, how many sketch hashes a record must share
-- for lookup_add to leave it to the detector, the histogram group keys (4 bytes each; ''
-- to read the whole sum window), the width the client expects the newest segment to have
-- and the fields of the first keys for it (4 bytes each, in the order of the wants below),
-- the part digests (16 bytes each) and the recipient keys (8 bytes each).  It builds
-- ``out`` (see RedisStore._parse_lookup; its first item is the newest segment's width, for
-- the client's next call), ``order`` (the ids of the records read), ``docs`` (id ->
-- record) and ``could_match`` (lookup_add.lua adds the record only when it is false).
--
-- Every redis.call and every string or table a script makes costs from a fraction of a
-- microsecond to a few (a string about a thousand instructions): each segment is read with
-- one HMGET of the fields the query's keys fall in, the records with one more; when no key
-- has a posting (a new message, mostly) the answer is made at once; the counts of the text
-- index and the recipients of the clusters found are read only when a record is returned.
local mkey, digest, hist = ARGV[2], ARGV[3], ARGV[4]
local hsum, window, maxpos = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cap, exact_cap, part_cap = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local hmax = tonumber(ARGV[11])
local sketch = split(ARGV[12], W_SKETCH)
local counted = split(ARGV[13], W_SKETCH)
local count_limit, least = tonumber(ARGV[15]), tonumber(ARGV[16])
local sent_bits, sent_fields = tonumber(ARGV[18]), ARGV[19]
local recipients = split(ARGV[21], W_RECIPIENT)
local at = 22

local meta = redis.call('HMGET', base .. 'c', 'p', 'segs', 'cur')
if meta[1] and meta[1] ~= ARGV[1] then
  return redis.error_reply('DUPFILTER-MISMATCH ' .. meta[1])
end
local segs = segments(meta[2])
read_cache.meta = meta

-- What to read: one "want" per key (kind, key, how many ids are still wanted, the ids
-- found), filled segment by segment, newest first.  where[id]: the segment holding the
-- record (a record and its postings are in one segment).  wfield: the wants' fields in the
-- newest segment, for a write into it that follows (lookup_add.lua).
local wkind, wkey, wleft, wids, wfield, where = {}, {}, {}, {}, {}, {}
local found_any = false
local function want(kind, key, limit)
  local j = #wkind + 1
  wkind[j], wkey[j], wleft[j] = kind, key, limit
  return j
end
local none = {}
local function ids_of(j) return wids[j] or none end
local function read(from, to)
  for number, seg in ipairs(segs) do
    -- One field per want (a field twice is read twice: cheaper than finding out).
    local fields, n = {}, 0
    local sent = seg.bits == sent_bits and #sent_fields or 0
    for j = from, to do
      if wleft[j] > 0 then
        n = n + 1
        local f = 4 * j <= sent and sub(sent_fields, 4 * j - 3, 4 * j)
                  or field(wkind[j], wkey[j], seg.bits)
        fields[n] = f
        if number == 1 then wfield[j] = f end
      end
    end
    if n > 0 then
      local values = redis.call('HMGET', seg.key, unpack(fields))
      if number == 1 then   -- kept for a write into this segment by the same script
        read_cache.key = seg.key
        for k = 1, n do read_cache.values[fields[k]] = values[k] end
      end
      local k = 0
      for j = from, to do
        local left = wleft[j]
        if left > 0 then
          k = k + 1
          local value = values[k]
          if value then   -- the entries for the key, newest first (see ``entries``)
            local key, init, ids = wkey[j], 1, wids[j]
            local kw = #key
            local width = kw + ID
            while left > 0 do
              local at = find(value, key, init, true)
              if not at then break end
              if (at - 1) % width == 0 then
                local id = sub(value, at + kw, at + width - 1)
                if ids == nil then ids = {}; wids[j] = ids; found_any = true end
                ids[#ids + 1] = id
                left = left - 1
                if where[id] == nil then where[id] = seg.key end
                init = at + width
              else
                init = at + 1
              end
            end
            wleft[j] = left
          end
        end
      end
    end
  end
end

local wm = mkey ~= '' and want('m', mkey, exact_cap) or nil
local wg = want('g', digest, exact_cap)
local swants = {}
for j, h in ipairs(sketch) do swants[j] = want('s', h, cap) end
local kwants = {}
for j, c in ipairs(split(ARGV[14], W_CHUNK_DIGEST)) do kwants[j] = want('k', c, cap) end
-- The histogram rule: records under the query's group keys (each record within the window
-- and the positions the rule allows shares at least one), or every record of the window.
local lo, hi = math.max(0, hsum - window), math.min(65535, hsum + window)
local hfirst, hgroup = #wkind + 1, {}
if window > 0 then
  if #ARGV[17] > 0 then
    for g, key in ipairs(split(ARGV[17], 4)) do hgroup[want('h', key, 1e15)] = g - 1 end
  else
    for s = lo, hi do want('H', p16(s), 1e15) end
  end
end
local hlast = #wkind
-- A short message's parts: their newest records count as found by digest.
local pwants = {}
for j, d in ipairs(split(ARGV[20], 16)) do pwants[j] = want('g', d, part_cap) end
read(1, #wkind)
-- The wants a record of this message has as postings, for lookup_add.lua: the first
-- ``reuse`` of them (the client knows how many), with their fields in the newest segment.
read_cache.wkind, read_cache.wkey, read_cache.wfield = wkind, wkey, wfield

local out, order, docs = {segs[1] and segs[1].bits or 0}, {}, {}
local could_match = false

-- The records: one HMGET per segment for the ids wanted; ``fetch`` brings those not read
-- yet.
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
    for k, id in ipairs(list) do fields[k] = 'd' .. id end
    local got = redis.call('HMGET', key, unpack(fields))
    for k, id in ipairs(list) do if got[k] then docs[id] = got[k] end end
  end
end

-- Ids (of records read) in a list, as "n, ids..." appended to ``to``.
local listed = {}
local function emit(to, ids)
  local kept = {}
  for _, id in ipairs(ids) do
    if docs[id] then
      kept[#kept + 1] = id
      if not listed[id] then listed[id] = true; order[#order + 1] = id end
    end
  end
  to[#to + 1] = #kept
  for _, id in ipairs(kept) do to[#to + 1] = u40(id, 0) end
  return #kept
end

if not found_any then
  -- Nothing under any key: no record, nothing to count.
  for _ = 1, 3 do out[#out + 1] = 0 end   -- Message-ID, digest ids; window size
  out[#out + 1] = 0                       -- histogram matches
  out[#out + 1] = #swants
  for _ = 1, #swants do out[#out + 1] = 0 end
  out[#out + 1] = #kwants
  for _ = 1, #kwants do out[#out + 1] = 0 end
  out[#out + 1] = 0                       -- counts
  out[#out + 1] = 0                       -- recipients of clusters
else
  local all = {}
  local function gather(j) for _, id in ipairs(ids_of(j)) do all[#all + 1] = id end end
  for j = 1, #wkind do gather(j) end
  fetch(all)

  -- The histogram rule: every record found compared bin by bin (with the group keys, only
  -- those in the window whose group really is the query's: a key number can be shared by
  -- chance); the closest ``hmax``, then the oldest.
  local close, diffs, wsize = {}, {}, 0
  if window > 0 then
    local hb = {byte(hist, 1, 36)}
    local counted_ids = {}
    local function compare(id)
      local data = docs[id]
      if counted_ids[id] then return end
      counted_ids[id] = true
      wsize = wsize + 1
      local diff = 0
      for k = 1, 36 do
        if byte(data, O_HISTOGRAM + k) ~= hb[k] then
          diff = diff + 1
          if diff > maxpos then return end
        end
      end
      diffs[id] = diff
      close[#close + 1] = id
    end
    for j = hfirst, hlast do
      local group = hgroup[j]
      for _, id in ipairs(ids_of(j)) do
        local data = docs[id]
        if data and group then
          local total = u16(data, O_HISTOGRAM_SUM)
          local same = total >= lo and total <= hi
          for k = group + 1, 36, HISTOGRAM_GROUPS do
            if not same then break end
            same = byte(data, O_HISTOGRAM + k) == hb[k]
          end
          if same then compare(id) end
        elseif data then
          compare(id)
        end
      end
    end
    local num = {}
    for _, id in ipairs(close) do num[id] = u40(id, 0) end
    table.sort(close, function(a, b)
      return diffs[a] < diffs[b] or (diffs[a] == diffs[b] and num[a] < num[b]) end)
    while #close > hmax do table.remove(close) end
  end

  local dids, seen_d = {}, {}
  for _, j in ipairs({wg, unpack(pwants)}) do
    for _, id in ipairs(ids_of(j)) do
      if not seen_d[id] then seen_d[id] = true; dids[#dids + 1] = id end
    end
  end
  local exact = emit(out, wm and ids_of(wm) or none) + emit(out, dids)
  out[#out + 1] = wsize
  local hkept = {}
  for _, id in ipairs(close) do if docs[id] then hkept[#hkept + 1] = id end end
  out[#out + 1] = #hkept
  for _, id in ipairs(hkept) do
    out[#out + 1] = u40(id, 0); out[#out + 1] = diffs[id]
    if not listed[id] then listed[id] = true; order[#order + 1] = id end
  end
  local hits = {}
  out[#out + 1] = #swants
  for _, j in ipairs(swants) do
    emit(out, ids_of(j))
    for _, id in ipairs(ids_of(j)) do
      if docs[id] then hits[id] = (hits[id] or 0) + 1 end
    end
  end
  local chunks = 0
  out[#out + 1] = #kwants
  for _, j in ipairs(kwants) do chunks = chunks + emit(out, ids_of(j)) end
  could_match = exact > 0 or #hkept > 0 or chunks > 0
  if not could_match then
    for _, count in pairs(hits) do if count >= least then could_match = true; break end end
  end

  -- How many different texts hold each sketch hash (the text index, 'n'), up to
  -- count_limit: only worth reading when there are records to compare.
  local nwant, nlist = {}, {}
  if #order > 0 and count_limit > 0 then
    local from = #wkind + 1
    for _, list in ipairs({sketch, counted}) do
      for _, h in ipairs(list) do
        if not nwant[h] then nwant[h] = want('n', h, count_limit); nlist[#nlist + 1] = h end
      end
    end
    if #wkind >= from then read(from, #wkind) end
  end
  out[#out + 1] = #nlist
  for _, h in ipairs(nlist) do out[#out + 1] = #ids_of(nwant[h]) end

  -- The query's recipients filed under the clusters of the records read ('r': recipient
  -- key, then the cluster's id as 8 bytes).
  local clusters, cwant = {}, {}
  if #recipients > 0 and #order > 0 then
    local from = #wkind + 1
    for _, id in ipairs(order) do
      local cluster = cluster_of(docs[id], id)
      if not cwant[cluster] then
        local wants = {}
        for k, r in ipairs(recipients) do wants[k] = want('r', r .. cluster, 1) end
        cwant[cluster] = wants
        clusters[#clusters + 1] = cluster
      end
    end
    read(from, #wkind)
  end
  local with = {}
  for _, cluster in ipairs(clusters) do
    local had = {}
    for k, j in ipairs(cwant[cluster]) do if #ids_of(j) > 0 then had[#had + 1] = recipients[k] end end
    if #had > 0 then with[#with + 1] = {cluster, had} end
  end
  out[#out + 1] = #with
  for _, item in ipairs(with) do
    out[#out + 1] = u64(item[1], 0)
    out[#out + 1] = #item[2]
    for _, r in ipairs(item[2]) do out[#out + 1] = r end
  end
end
