-- The lookup: every index of one partition for one probe, in one pass over its segments.
-- ARGV (see RedisStore._lookup_args): params id, Message-ID key or '', digest, histogram,
-- sum, window, max positions, posting cap, max candidates, min shared, common threshold (a
-- last-line hash with this many postings here is boilerplate), then the sketch hashes, the
-- tail hashes and the chunk digests (each list one string of fixed-width values), 1 when the
-- store has several partitions, the most histogram candidates, how far to count a tail
-- hash's postings, the probe's histogram group keys (4 bytes each, one per group; '' to read
-- the whole sum window instead), then the width the client expects the newest segment to
-- have and the fields of the probe's keys for it (4 bytes each, in the order of the wants
-- below), and the probe's part digests (16 bytes each).  It builds ``out`` (see RedisStore._parse_lookup; its first item is the newest
-- segment's width, for the client's next call), ``order`` (the ids of the records
-- returned) and ``docs`` (id -> record).
--
-- Every redis.call and every string or table a script makes costs from a fraction of a
-- microsecond to a few (a string about a thousand instructions): each segment is read with
-- one HMGET of the fields the probe's keys fall in, the records of all candidates of a
-- segment with one more; when no key has a posting (a new message, mostly) the answer is
-- made at once; the last-line hashes outside the index are read only when a record is
-- returned.
local mkey, digest, hist = ARGV[2], ARGV[3], ARGV[4]
local hsum, window, maxpos = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cap, maxc = tonumber(ARGV[8]), tonumber(ARGV[9])
local min_shared, common_n = tonumber(ARGV[10]), tonumber(ARGV[11])
local sketch = split(ARGV[12], W_SKETCH)
local ntail = #ARGV[13] / W_SKETCH
-- On a store of several partitions the client adds up every partition's tail counts.
local all_tails = ARGV[15] == '1'
local hmax = tonumber(ARGV[16])   -- Probe.histogram_limit: at most maxc
local count_limit = tonumber(ARGV[17])
local sent_bits, sent_fields = tonumber(ARGV[19]), ARGV[20]
local at = 22

local meta = redis.call('HMGET', base .. 'c', 'p', 'segs', 'cur')
if meta[1] and meta[1] ~= ARGV[1] then
  return redis.error_reply('DUPFILTER-MISMATCH ' .. meta[1])
end
local segs = segments(meta[2])
read_cache.meta = meta

-- What to read: one "want" per probe key (kind, key, how many ids are still wanted, the ids
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

local wm = mkey ~= '' and want('m', mkey, NEWEST_EXACT) or nil
local wg = want('g', digest, NEWEST_EXACT)
-- Sketch hashes: the newest ``cap`` ids each; a last-line hash is read further, up to
-- ``count_limit``, since how many records share it says whether it is boilerplate.
local is_tail = {}
if count_limit > 0 then
  for j = 0, ntail - 1 do is_tail[sub(ARGV[13], j * W_SKETCH + 1, (j + 1) * W_SKETCH)] = true end
end
local swants, by_hash = {}, {}
local tail_limit = math.max(cap, count_limit)
local w = #wkind
for j, h in ipairs(sketch) do
  w = w + 1
  wkind[w], wkey[w], wleft[w] = 's', h, is_tail[h] and tail_limit or cap
  swants[j], by_hash[h] = w, w
end
local kwants = {}
for j, c in ipairs(split(ARGV[14], W_CHUNK_DIGEST)) do kwants[j] = want('k', c, cap) end
-- The histogram rule: records under the probe's group keys (each record within the window
-- and the positions the rule allows shares at least one), or every record of the window.
local lo, hi = math.max(0, hsum - window), math.min(65535, hsum + window)
local hfirst, hgroup = #wkind + 1, {}
if window > 0 then
  if #ARGV[18] > 0 then
    for g, key in ipairs(split(ARGV[18], 4)) do hgroup[want('h', key, 1e15)] = g - 1 end
  else
    for s = lo, hi do want('H', p16(s), 1e15) end
  end
end
local hlast = #wkind
-- A short message's parts: their newest records count as found by digest.
local pwants = {}
for j, d in ipairs(split(ARGV[21], 16)) do pwants[j] = want('g', d, NEWEST_PART) end
read(1, #wkind)
-- The wants a record of this message has as postings, for lookup_add.lua: the first
-- ``reuse`` of them (the client knows how many), with their fields in the newest segment.
read_cache.wkind, read_cache.wkey, read_cache.wfield = wkind, wkey, wfield

local out, order, docs = {segs[1] and segs[1].bits or 0}, {}, {}
if not found_any and not all_tails then
  -- Nothing under any key: no candidate, no record, no boilerplate to count.
  for _ = 1, 3 do out[#out + 1] = 0 end
  out[#out + 1] = 0
  out[#out + 1] = ntail
  for _ = 1, ntail do out[#out + 1] = 0 end
  out[#out + 1] = 0
  out[#out + 1] = 0
else
  -- Ids under ``list``'s keys (the first ``cap`` of each) sharing at least ``least`` of
  -- them, most shared first (ties: first seen), with their counts.
  local function ranked(list, least)
    local hits, first, ranking = {}, {}, {}
    for _, j in ipairs(list) do
      local ids = ids_of(j)
      for k = 1, math.min(#ids, cap) do
        local id = ids[k]
        local c = hits[id]
        if c == nil then first[#first + 1] = id; hits[id] = 1 else hits[id] = c + 1 end
      end
    end
    local pos = {}
    for k, id in ipairs(first) do
      pos[id] = k
      if hits[id] >= least then ranking[#ranking + 1] = id end
    end
    table.sort(ranking, function(a, b)
      return hits[a] > hits[b] or (hits[a] == hits[b] and pos[a] < pos[b]) end)
    return ranking, hits
  end

  -- Indexed last-line hashes that many records share are boilerplate: not looked up
  -- (unless nothing else is left).
  local index = {}
  for j, h in ipairs(sketch) do
    if not (is_tail[h] and #ids_of(swants[j]) >= common_n) then index[#index + 1] = swants[j] end
  end
  if #index == 0 then index = swants end
  local shingles, shits = ranked(index, min_shared)
  local chunks, chits = ranked(kwants, 1)

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

  -- The histogram rule: every record found compared bin by bin (with the group keys, only
  -- those in the window whose group really is the probe's: a key number can be shared by
  -- chance).
  local close, diffs, wsize = {}, {}, 0
  if window > 0 then
    local hids, seen = {}, {}
    for j = hfirst, hlast do
      for _, id in ipairs(ids_of(j)) do
        if not seen[id] then seen[id] = true; hids[#hids + 1] = id end
      end
    end
    fetch(hids)
    local hb = {byte(hist, 1, 36)}
    local counted = {}
    local function compare(id)
      local data = docs[id]
      if counted[id] then return end
      counted[id] = true
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
    -- Closest first, then oldest (ids grow with time), as LMDB.
    local num = {}
    for _, id in ipairs(close) do num[id] = u40(id, 0) end
    table.sort(close, function(a, b)
      return diffs[a] < diffs[b] or (diffs[a] == diffs[b] and num[a] < num[b]) end)
  end

  local mids, dids = wm and ids_of(wm) or none, ids_of(wg)
  if #pwants > 0 then
    local listed = {}
    local all = {}
    for _, id in ipairs(dids) do listed[id] = true; all[#all + 1] = id end
    for _, j in ipairs(pwants) do
      for _, id in ipairs(ids_of(j)) do
        if not listed[id] then listed[id] = true; all[#all + 1] = id end
      end
    end
    dids = all
  end
  local wanted = {}
  for _, list in ipairs({mids, dids}) do
    for _, id in ipairs(list) do wanted[#wanted + 1] = id end
  end
  for _, pair in ipairs({{shingles, maxc}, {chunks, maxc}}) do
    for k = 1, math.min(#pair[1], pair[2]) do wanted[#wanted + 1] = pair[1][k] end
  end
  fetch(wanted)

  local ordered = {}
  local function keep(id)
    if not ordered[id] then ordered[id] = true; order[#order + 1] = id end
  end
  local function emit_ids(to, ids)
    local kept = {}
    for _, id in ipairs(ids) do if docs[id] then kept[#kept + 1] = id; keep(id) end end
    to[#to + 1] = #kept
    for _, id in ipairs(kept) do to[#to + 1] = u40(id, 0) end
  end
  local function emit_ranked(to, ids, score, most)
    local kept = {}
    for k = 1, #ids do
      if #kept >= most then break end
      if docs[ids[k]] then kept[#kept + 1] = ids[k]; keep(ids[k]) end
    end
    to[#to + 1] = #kept
    for _, id in ipairs(kept) do to[#to + 1] = u40(id, 0); to[#to + 1] = score[id] end
  end
  local found = {}
  emit_ids(out, mids)
  emit_ids(out, dids)
  out[#out + 1] = wsize
  emit_ranked(out, close, diffs, hmax)
  emit_ranked(found, shingles, shits, maxc)
  emit_ranked(found, chunks, chits, maxc)

  -- Posting counts of the last-line hashes (up to count_limit): only worth reading when
  -- records are compared (with several partitions always: the client adds them up).
  out[#out + 1] = ntail
  if #order == 0 and not all_tails then
    for _ = 1, ntail do out[#out + 1] = 0 end
  else
    local tails = split(ARGV[13], W_SKETCH)
    local from = #wkind + 1
    for _, h in ipairs(tails) do
      if not by_hash[h] then by_hash[h] = want('s', h, count_limit) end
    end
    if #wkind >= from and count_limit > 0 then read(from, #wkind) end
    for _, h in ipairs(tails) do out[#out + 1] = math.min(#ids_of(by_hash[h]), count_limit) end
  end
  for _, v in ipairs(found) do out[#out + 1] = v end
end
