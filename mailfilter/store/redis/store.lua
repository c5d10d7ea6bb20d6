local function bind_parameters()
  local have = redis.call('GET', base .. 'p')
  if not have then
    redis.call('SET', base .. 'p', params)
    return 1
  elseif have ~= params then
    return redis.error_reply('DUPFILTER-MISMATCH ' .. have)
  end
  return 0
end

local function entries(data)
  local keys = {base .. 'g' .. sub(data, O_DIGEST + 1, O_DIGEST + 16)}
  local mkey = sub(data, O_MESSAGE_ID_KEY + 1, O_MESSAGE_ID_KEY + 16)
  if mkey ~= ZERO16 then keys[#keys + 1] = base .. 'm' .. mkey end
  local ns, nc = u16(data, O_N_SKETCH), u16(data, O_N_CHUNKS)
  for j = 0, math.min(ns, index_size) - 1 do
    keys[#keys + 1] = base .. 's' .. sub(data, HEADER + j * W_SKETCH + 1, HEADER + (j + 1) * W_SKETCH)
  end
  local coff = HEADER + ns * W_SKETCH
  for j = 0, nc - 1 do
    keys[#keys + 1] = base .. 'k' .. sub(data, coff + j * W_CHUNK + 1, coff + j * W_CHUNK + 8)
  end
  return keys, base .. 'h' .. u16(data, O_HISTOGRAM_SUM), sub(data, O_HISTOGRAM + 1, O_HISTOGRAM + 36)
end

-- Postings keep their newest KEEP_POSTINGS ids (older ones point at expired records or are never
-- read); the sum window and the time index, which are read whole, are trimmed by time.
-- The trims run for one record in 16 (a list holds about KEEP_POSTINGS + 16 ids at most; the time
-- trims leave a few expired entries a little longer, which every reader skips anyway).
-- Expiry is PEXPIREAT of one absolute time per script: cheaper than EXPIRE, which Redis
-- rewrites into PEXPIREAT for every call.
local expire_ms = nil
local function expire(key)
  if expire_ms == nil then
    local t = redis.call('TIME')
    expire_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ret * 1000
  end
  redis.call('PEXPIREAT', key, expire_ms)
end

local function index_all(id, data, when)
  local keys, sum_key, hist = entries(data)
  local trim = math.floor(tonumber(id) / parts) % 16 == 0
  for _, key in ipairs(keys) do
    redis.call('ZADD', key, when, id)
    if trim then redis.call('ZREMRANGEBYRANK', key, 0, -KEEP_POSTINGS - 1) end
    expire(key)
  end
  for _, pair in ipairs({{sum_key, hist .. id}, {base .. 't', id}}) do
    redis.call('ZADD', pair[1], when, pair[2])
    if trim then redis.call('ZREMRANGEBYSCORE', pair[1], '-inf', '(' .. (when - ret)) end
    expire(pair[1])
  end
end

local function recipients_of(data)
  local roff = HEADER + u16(data, O_N_SKETCH) * W_SKETCH + u16(data, O_N_CHUNKS) * W_CHUNK
  return roff, u16(data, O_N_RECIPIENTS)
end

local function touch(id, when, recips)
  local key = base .. 'd' .. id
  local data = redis.call('GET', key)
  if not data then return 0 end
  local last = math.max(u32(data, O_LAST_SEEN), when)
  data = sub(data, 1, O_LAST_SEEN) .. p32(last) .. p32(u32(data, O_SEEN) + 1) .. sub(data, O_SEEN + 5)
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
    data = sub(data, 1, O_N_RECIPIENTS) .. p16(#list) .. sub(data, O_N_RECIPIENTS + 3, roff) .. table.concat(list)
           .. sub(data, roff + nr * W_RECIPIENT + 1)
  end
  redis.call('SET', key, data, 'EX', ret)
  index_all(id, data, last)
  return 1
end

local function has_content(data) return u32(data, O_WORD_COUNT) > 0 or u16(data, O_N_CHUNKS) > 0 end

local function add(data)
  local when = u32(data, O_LAST_SEEN)
  if has_content(data) then
    local digest = sub(data, O_DIGEST + 1, O_DIGEST + 16)
    for _, id in ipairs(redis.call('ZREVRANGE', base .. 'g' .. digest, 0, NEWEST_EXACT - 1)) do
      local old = redis.call('GET', base .. 'd' .. id)
      if old and has_content(old) then
        local roff, nr = recipients_of(data)
        touch(id, when, sub(data, roff + 1, roff + nr * W_RECIPIENT))
        return tonumber(id)
      end
    end
  end
  local id = redis.call('INCR', base .. 'n') * parts + part
  redis.call('SET', base .. 'd' .. id, data, 'EX', ret)
  index_all(id, data, when)
  return id
end

local function forget(id)
  local key = base .. 'd' .. id
  local data = redis.call('GET', key)
  if not data then return 0 end
  local keys, sum_key, hist = entries(data)
  for _, k in ipairs(keys) do redis.call('ZREM', k, id) end
  redis.call('ZREM', sum_key, hist .. id)
  redis.call('ZREM', base .. 't', id)
  redis.call('DEL', key)
  return 1
end

