-- Shared by every script: the store's layout helpers.  The constants (HEADER, the O_<FIELD>
-- offsets and W_<SECTION> widths of an encoded record, KEY_WIDTH and SHIFT of the posting
-- kinds, limits) come first, written by mailfilter/store/redis/__init__.py from their one
-- definition in Python.
--
-- A partition's keys (base = prefix + {tag}):
--   base .. 'c'       hash: 'p' parameters id, 'n' id counter, 'cur' the segment being
--                     written ("n,bits,opened ms,capacity,first counter"), 'segs' the live
--                     segments ("n,bits n,bits ...", oldest first), 'DAY:VERDICT' counts
--   base .. 'x' .. n  hash, one per segment: 'd' .. ID -> encoded record, and posting fields
--                     KIND .. 3-byte field number -> entries (KEY .. ID), newest first
--   base .. 't'       sorted set: decimal id -> last seen (stats, listing, verify)
-- ID is a record id as 5 big-endian bytes.  A record and all its postings are in one
-- segment; a segment expires whole (PEXPIREAT, one retention after its last write).
local base = KEYS[1]
local byte, sub, char, find = string.byte, string.sub, string.char, string.find
local floor = math.floor
local ID = 5
-- The write context, assigned by the scripts that write (write.lua, lookup_add.lua).
local params, ret, index_size, parts, part, seg_ms
-- Fields of the newest segment as the lookup read them (field -> value, false: absent), and
-- the partition's 'c' fields it read, for the write that may follow in the same script.
local read_cache = {values = {}}

local function u16(s, o) local a, b = byte(s, o + 1, o + 2) return a * 256 + b end
local function u32(s, o)
  local a, b, c, d = byte(s, o + 1, o + 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function u40(s, o)
  local a, b, c, d, e = byte(s, o + 1, o + 5)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end
local function u64(s, o) return u32(s, o) * 4294967296 + u32(s, o + 4) end
local function p16(v) return char(floor(v / 256) % 256, v % 256) end
local function p32(v)
  return char(floor(v / 16777216) % 256, floor(v / 65536) % 256, floor(v / 256) % 256, v % 256)
end
local function p40(v) return char(floor(v / 4294967296) % 256) .. p32(v % 4294967296) end

-- Fixed-width values packed in one string, as a list.
local function split(packed, width)
  local values = {}
  for j = 1, #packed / width do values[j] = sub(packed, (j - 1) * width + 1, j * width) end
  return values
end

-- The live segments, newest first, from the 'segs' field.
local function segments(text)
  local list = {}
  if text then
    for n, bits in string.gmatch(text, '(%d+),(%d+)') do
      table.insert(list, 1, {key = base .. 'x' .. n, n = n, bits = tonumber(bits)})
    end
  end
  return list
end

-- The field of a posting of ``kind`` under ``key`` in a segment of ``bits``: the kind, then
-- the low ``bits - SHIFT[kind]`` bits of the key's first 4 (sums: 2) bytes read as a number,
-- as 3 bytes.  The client sends the fields of a probe's and a record's keys computed for the
-- newest segment's width; this is for the others (and for records moved or forgotten).
local function field(kind, key, bits)
  local kw = KEY_WIDTH[kind] == 2 and 2 or 4
  local b = bits - SHIFT[kind]
  if b > 8 * kw then b = 8 * kw end
  if b > 16 then return kind .. char(byte(key, kw - 2) % POW[b - 16]) .. sub(key, kw - 1, kw)
  elseif b > 8 then return kind .. '\0' .. char(byte(key, kw - 1) % POW[b - 8]) .. sub(key, kw, kw)
  elseif b > 0 then return kind .. '\0\0' .. char(byte(key, kw) % POW[b])
  end
  return kind .. '\0\0\0'
end

-- Ids (newest first) of the entries for ``key`` in a field's ``value``, at most ``limit``,
-- appended to ``out``; returns how many.  Entries are #key + ID bytes; a match that does not
-- start an entry is skipped.
local function entries(value, key, limit, out)
  local width, kw, init, n = #key + ID, #key, 1, 0
  while n < limit do
    local at = find(value, key, init, true)
    if not at then break end
    if (at - 1) % width == 0 then
      n = n + 1
      if out then out[#out + 1] = sub(value, at + kw, at + width - 1) end
      init = at + width
    else
      init = at + 1
    end
  end
  return n
end

-- The number a histogram group key is filed under in Redis (the client's
-- mailfilter.store.histogram_group_number): the group and its 12 bins read as one
-- big-endian number, modulo a prime.  (Without the sum: a lookup reads one key per group,
-- and checks the sums of what it finds.)
local function group_number(g, hist)
  local h = g % HISTOGRAM_PRIME
  for j = g + 1, 36, HISTOGRAM_GROUPS do h = (h * 256 + byte(hist, j)) % HISTOGRAM_PRIME end
  return h
end

-- Where a record's version 3 tail (cluster, novel hashes) starts; nil for older records.
local function tail_of(data)
  if byte(data, 1) < 3 then return nil end
  local off = HEADER + u16(data, O_N_SKETCH) * W_SKETCH + u16(data, O_N_CHUNKS) * W_CHUNK
              + u16(data, O_N_RECIPIENTS) * W_RECIPIENT + u16(data, O_N_MESSAGE_ID)
  return off + 2 + u16(data, off)
end

-- The id of a record's text cluster as 8 bytes (its own id when it heads one).
-- True for a record that joins another's text cluster (a copy, more mailboxes for a text).
local function in_cluster(data)
  local off = tail_of(data)
  return off ~= nil and sub(data, off + 1, off + 8) ~= '\0\0\0\0\0\0\0\0'
end

local function cluster_of(data, id)
  local off = tail_of(data)
  if off then
    local cluster = sub(data, off + 1, off + 8)
    if cluster ~= '\0\0\0\0\0\0\0\0' then return cluster end
  end
  return '\0\0\0' .. id
end
