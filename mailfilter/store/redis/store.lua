-- The writes: add, touch, forget (and import, for upgrades).  They need the write context
-- (params, ret, index_size, parts, part, seg_ms) and ``state`` from ``open_state``.

local state   -- the partition's 'c' fields the writes need, read once per script
local function open_state()
  if state then return state end
  local got = read_cache.meta or redis.call('HMGET', base .. 'c', 'p', 'segs', 'cur')
  local created = 0
  if not got[1] then
    redis.call('HSET', base .. 'c', 'p', params)
    created = 1
  elseif got[1] ~= params then
    return redis.error_reply('DUPFILTER-MISMATCH ' .. got[1])
  end
  local t = redis.call('TIME')
  state = {created = created, now_ms = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000),
           cur = got[3], segs = segments(got[2]), segs_text = got[2] or ''}
  state.expire_ms = state.now_ms + ret * 1000
  return state
end

-- The segment new records go to: the newest, unless it is older than seg_ms or holds more
-- records than it was sized for; then a new one, sized from the last (its field count grows
-- with the records it is expected to hold, so that a field keeps ~ENTRIES_PER_FIELD entries).
local function current_segment(counter)
  if state.current then return state.current end
  local n, bits, opened, capacity, first
  if state.cur then
    n, bits, opened, capacity, first = string.match(state.cur, '(%d+),(%d+),(%d+),(%d+),(%d+)')
    n, bits, opened = tonumber(n), tonumber(bits), tonumber(opened)
    capacity, first = tonumber(capacity), tonumber(first)
  end
  local held = n and counter - first or 0
  if not n or state.now_ms - opened >= seg_ms or held > capacity then
    local size = SEGMENT_RECORDS_MIN
    if n and held > capacity then size = capacity * 4
    elseif n then size = math.max(SEGMENT_RECORDS_MIN, held * 2) end
    bits = math.ceil(math.log(index_size * size / ENTRIES_PER_FIELD) / math.log(2))
    bits = math.max(SEGMENT_BITS_MIN, math.min(SEGMENT_BITS_MAX, bits))
    n = (n or 0) + 1
    -- The registry keeps the segments that still exist.
    local live = {}
    for _, seg in ipairs(state.segs) do
      if redis.call('EXISTS', seg.key) == 1 then table.insert(live, 1, seg.n .. ',' .. seg.bits) end
    end
    live[#live + 1] = n .. ',' .. bits
    state.cur = table.concat({n, bits, state.now_ms, size, counter}, ',')
    state.segs_text = table.concat(live, ' ')
    state.segs = segments(state.segs_text)
    redis.call('HSET', base .. 'c', 'cur', state.cur, 'segs', state.segs_text)
  end
  state.current = state.segs[1]
  return state.current
end

local function has_content(data) return u32(data, O_WORD_COUNT) > 0 or u16(data, O_N_CHUNKS) > 0 end

-- The keys of a record's recipients under its cluster ('r' postings): each recipient key,
-- then the cluster's id as 8 bytes.
local function recipient_keys(data, id)
  local cluster = cluster_of(data, id)
  local roff = HEADER + u16(data, O_N_SKETCH) * W_SKETCH + u16(data, O_N_CHUNKS) * W_CHUNK
  local keys, seen = {}, {}
  for j = 0, u16(data, O_N_RECIPIENTS) - 1 do
    local key = sub(data, roff + j * W_RECIPIENT + 1, roff + (j + 1) * W_RECIPIENT) .. cluster
    if not seen[key] then seen[key] = true; keys[#keys + 1] = key end
  end
  return keys
end

-- (kind, key) of every posting of record ``id``, each once (as RedisStore._postings).
local function postings(data, id)
  local list, seen = {}, {}
  local function add(kind, key)
    local name = kind .. key
    if not seen[name] then seen[name] = true; list[#list + 1] = {kind, key} end
  end
  add('g', sub(data, O_DIGEST + 1, O_DIGEST + 16))
  local mk = sub(data, O_MESSAGE_ID_KEY + 1, O_MESSAGE_ID_KEY + 16)
  if mk ~= ZERO16 then add('m', mk) end
  local ns, nc = u16(data, O_N_SKETCH), u16(data, O_N_CHUNKS)
  for j = 0, math.min(ns, index_size) - 1 do
    add('s', sub(data, HEADER + j * W_SKETCH + 1, HEADER + (j + 1) * W_SKETCH))
  end
  local coff = HEADER + ns * W_SKETCH
  for j = 0, nc - 1 do
    add('k', sub(data, coff + j * W_CHUNK + 1, coff + j * W_CHUNK + W_CHUNK_DIGEST))
  end
  local sum = sub(data, O_HISTOGRAM_SUM + 1, O_HISTOGRAM_SUM + 2)
  add('H', sum)
  local hist = sub(data, O_HISTOGRAM + 1, O_HISTOGRAM + 36)
  for g = 0, HISTOGRAM_GROUPS - 1 do add('h', p32(group_number(g, hist))) end
  -- The text index: the hashes new to the record's cluster (all index hashes for a record
  -- that heads one, and for records before version 3).
  local tail = tail_of(data)
  local nn = tail and u16(data, tail + 8) or ALL_NOVEL
  if nn == ALL_NOVEL then
    for j = 0, math.min(ns, index_size) - 1 do
      add('n', sub(data, HEADER + j * W_SKETCH + 1, HEADER + (j + 1) * W_SKETCH))
    end
  else
    for j = 0, nn - 1 do
      add('n', sub(data, tail + 10 + j * W_SKETCH + 1, tail + 10 + (j + 1) * W_SKETCH))
    end
  end
  for _, key in ipairs(recipient_keys(data, id)) do add('r', key) end
  return list
end

-- Keep at most KEEP_POSTINGS entries (the newest) per key in a field's value.
local function trim(value, width, kw)
  local counts, kept = {}, {}
  for j = 1, #value, width do
    local key = sub(value, j, j + kw - 1)
    local c = (counts[key] or 0) + 1
    counts[key] = c
    if c <= KEEP_POSTINGS then kept[#kept + 1] = sub(value, j, j + width - 1) end
  end
  return table.concat(kept)
end

-- Put a record and its postings in a segment.  ``sent``: the postings as the client sent
-- them (each its field for the width ``sent_bits``, then its key), after the first
-- ``reuse`` keys the lookup of the same script read (with their fields there); else they
-- are read from the record.  Fields the lookup read there are not read again.
local function put(seg, id, data, sent, sent_bits, reuse)
  local keys, names = {}, {}
  local same = read_cache.key == seg.key
  local cache = same and read_cache.values or {}
  read_cache.key = nil   -- (the values change now)
  if reuse and reuse > 0 then
    local wkind, wkey, wfield = read_cache.wkind, read_cache.wkey, read_cache.wfield
    for j = 1, reuse do
      keys[j] = wkey[j]
      names[j] = same and wfield[j] or field(wkind[j], wkey[j], seg.bits)
    end
  end
  if (sent and sent ~= '') or (reuse and reuse > 0) then
    local off, n = 1, #(sent or '')
    while off <= n do
      local f = sub(sent, off, off + 3)
      local kind = sub(f, 1, 1)
      local kw = KEY_WIDTH[kind]
      local key = sub(sent, off + 4, off + 3 + kw)
      keys[#keys + 1] = key
      names[#names + 1] = sent_bits == seg.bits and f or field(kind, key, seg.bits)
      off = off + 4 + kw
    end
    -- The client never sends these: they need the record's id.
    for _, key in ipairs(recipient_keys(data, id)) do
      keys[#keys + 1] = key
      names[#names + 1] = field('r', key, seg.bits)
    end
  else
    for _, p in ipairs(postings(data, id)) do
      keys[#keys + 1] = p[2]
      names[#names + 1] = field(p[1], p[2], seg.bits)
    end
  end
  local fields, slot, values, missing, missing_at, at_field = {}, {}, {}, {}, {}, {}
  for j, f in ipairs(names) do
    local k = slot[f]
    if k == nil then
      k = #fields + 1
      fields[k], slot[f] = f, k
      local known = cache[f]
      if known == nil then
        missing[#missing + 1] = f
        missing_at[#missing] = k
      else
        values[k] = known
      end
    end
    at_field[j] = k
  end
  if #missing > 0 then
    local got = redis.call('HMGET', seg.key, unpack(missing))
    for j, k in ipairs(missing_at) do values[k] = got[j] end
  end
  for j, key in ipairs(keys) do
    local k = at_field[j]
    local width = #key + ID
    local v = key .. id .. (values[k] or '')
    local n = #v / width
    if n >= KEEP_POSTINGS + 256 and n % 256 == 0 then v = trim(v, width, #key) end
    values[k] = v
  end
  local args = {'d' .. id, data}
  for k, f in ipairs(fields) do args[#args + 1] = f; args[#args + 1] = values[k] end
  redis.call('HSET', seg.key, unpack(args))
  redis.call('PEXPIREAT', seg.key, state.expire_ms)
end

-- Take a record and its postings out of a segment.
local function unput(seg, id, data)
  local list = postings(data, id)
  local fields, slot = {}, {}
  for _, p in ipairs(list) do
    local f = field(p[1], p[2], seg.bits)
    if slot[f] == nil then fields[#fields + 1] = f; slot[f] = #fields end
    p[3] = slot[f]
  end
  local values = redis.call('HMGET', seg.key, unpack(fields))
  local changed = {}
  for _, p in ipairs(list) do
    local v, entry, width = values[p[3]], p[2] .. id, #p[2] + ID
    local init = 1
    while v do
      local at = find(v, entry, init, true)
      if not at then break end
      if (at - 1) % width == 0 then
        v = sub(v, 1, at - 1) .. sub(v, at + width)
        changed[p[3]] = true
        break
      end
      init = at + 1
    end
    values[p[3]] = v
  end
  local set, gone = {}, {'d' .. id}
  for j in pairs(changed) do
    if values[j] == '' then gone[#gone + 1] = fields[j]
    else set[#set + 1] = fields[j]; set[#set + 1] = values[j] end
  end
  if #set > 0 then redis.call('HSET', seg.key, unpack(set)) end
  redis.call('HDEL', seg.key, unpack(gone))
end

-- The segment holding record ``id`` (newest first), and the record.
local function locate(id)
  for _, seg in ipairs(state.segs) do
    local data = redis.call('HGET', seg.key, 'd' .. id)
    if data then return seg, data end
  end
end

local function note_time(id, when)
  local key = base .. 't'
  redis.call('ZADD', key, when, u40(id, 0))
  if floor(u40(id, 0) / parts) % 16 == 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (when - ret))
  end
  redis.call('PEXPIREAT', key, state.expire_ms)
end

local function recipients_of(data)
  local roff = HEADER + u16(data, O_N_SKETCH) * W_SKETCH + u16(data, O_N_CHUNKS) * W_CHUNK
  return roff, u16(data, O_N_RECIPIENTS)
end

-- One more sighting: seen + 1, last seen, recipients merged; the record moves to the
-- current segment (with its postings) when it is in an older one.
local function touch(id, when, recips)
  local seg, data = locate(id)
  if not seg then return 0 end
  local last = math.max(u32(data, O_LAST_SEEN), when)
  local old = data
  data = sub(data, 1, O_LAST_SEEN) .. p32(last) .. p32(u32(data, O_SEEN) + 1)
         .. sub(data, O_SEEN + 5)
  local roff, nr = recipients_of(data)
  local known, list, added = {}, {}, false
  for j = 0, nr - 1 do
    local r = sub(data, roff + j * W_RECIPIENT + 1, roff + (j + 1) * W_RECIPIENT)
    known[r] = true
    list[#list + 1] = r
  end
  for j = 0, #recips / W_RECIPIENT - 1 do
    local r = sub(recips, j * W_RECIPIENT + 1, (j + 1) * W_RECIPIENT)
    if not known[r] then known[r] = true; list[#list + 1] = r; added = true end
  end
  if added then
    while #list > RECIPIENTS_MAX do table.remove(list, 1) end
    data = sub(data, 1, O_N_RECIPIENTS) .. p16(#list) .. sub(data, O_N_RECIPIENTS + 3, roff)
           .. table.concat(list) .. sub(data, roff + nr * W_RECIPIENT + 1)
  end
  local current = current_segment(tonumber(redis.call('HGET', base .. 'c', 'n')) or 0)
  if current.key == seg.key and not added then
    redis.call('HSET', seg.key, 'd' .. id, data)
    redis.call('PEXPIREAT', seg.key, state.expire_ms)
  else   -- moved, or new recipients to file under the cluster: its postings again
    unput(seg, id, old)
    put(current, id, data, nil, nil)
  end
  note_time(id, last)
  return 1
end

-- Store a record under ``id`` (ARGV-given on an upgrade, else the next one).
local function insert(data, sent, sent_bits, id, reuse)
  local counter
  if id then
    counter = tonumber(redis.call('HGET', base .. 'c', 'n')) or 0
  else
    counter = redis.call('HINCRBY', base .. 'c', 'n', 1)
    id = p40(counter * parts + part)
  end
  put(current_segment(counter), id, data, sent, sent_bits, reuse)
  note_time(id, u32(data, O_LAST_SEEN))
  return u40(id, 0)
end

-- Add a record; one with the same digest and some content is a sighting of that one instead
-- (so two hosts racing with one message leave one record) — unless it joins a text cluster
-- on purpose (the detector found its match: a copy, or more mailboxes than a record holds).
local function add(data, sent, sent_bits, check_digest, reuse)
  if check_digest and has_content(data) and not in_cluster(data) then
    local digest = sub(data, O_DIGEST + 1, O_DIGEST + 16)
    for _, seg in ipairs(state.segs) do
      local value = redis.call('HGET', seg.key, field('g', digest, seg.bits))
      if value then
        local ids = {}
        entries(value, digest, NEWEST_EXACT, ids)
        for _, id in ipairs(ids) do
          local old = redis.call('HGET', seg.key, 'd' .. id)
          if old and has_content(old) then
            local roff, nr = recipients_of(data)
            touch(id, u32(data, O_LAST_SEEN), sub(data, roff + 1, roff + nr * W_RECIPIENT))
            return u40(id, 0)
          end
        end
      end
    end
  end
  return insert(data, sent, sent_bits, nil, reuse)
end

-- Give an older record (written before text clusters) its text-index and recipient
-- postings, appended after its segment's entries (an upgrade goes from the newest record to
-- the oldest, so the order stays newest first).
local function extend(id)
  local seg, data = locate(id)
  if not seg then return 0 end
  local fields, slot, values = {}, {}, {}
  local wanted = {}
  for _, p in ipairs(postings(data, id)) do
    if p[1] == 'n' or p[1] == 'r' then
      local f = field(p[1], p[2], seg.bits)
      if slot[f] == nil then fields[#fields + 1] = f; slot[f] = #fields end
      wanted[#wanted + 1] = {slot[f], p[2]}
    end
  end
  if #fields == 0 then return 1 end
  local got = redis.call('HMGET', seg.key, unpack(fields))
  for k = 1, #fields do values[k] = got[k] or '' end
  for _, w in ipairs(wanted) do values[w[1]] = values[w[1]] .. w[2] .. id end
  local args = {}
  for k, f in ipairs(fields) do args[#args + 1] = f; args[#args + 1] = values[k] end
  redis.call('HSET', seg.key, unpack(args))
  return 1
end

-- A record written anew (its postings made again from it), in the segment it is in.
local function update(id, data)
  local seg, old = locate(id)
  if not seg then return 0 end
  unput(seg, id, old)
  put(seg, id, data, nil, nil)
  note_time(id, u32(data, O_LAST_SEEN))
  return 1
end

local function forget(id)
  local seg, data = locate(id)
  if not seg then return 0 end
  unput(seg, id, data)
  redis.call('ZREM', base .. 't', u40(id, 0))
  return 1
end
