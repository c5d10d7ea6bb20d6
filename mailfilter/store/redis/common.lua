-- Shared by every script: helpers over the record layout.  The constants (HEADER,
-- O_<FIELD> offsets, widths, limits) are prepended by mailfilter/store/redis/__init__.py
-- from their one definition in Python (mailfilter.store.LAYOUT and the store's limits).
local base = KEYS[1]
local byte, sub = string.byte, string.sub
local ZERO16 = string.rep('\0', 16)
-- The write context, assigned by the script that writes (write.lua, lookup_add.lua).
local params, ret, index_size, parts, part
local function u16(s, o) local a, b = byte(s, o + 1, o + 2) return a * 256 + b end
local function u32(s, o)
  local a, b, c, d = byte(s, o + 1, o + 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function p16(v) return string.char(math.floor(v / 256) % 256, v % 256) end
local function p32(v)
  return string.char(math.floor(v / 16777216) % 256, math.floor(v / 65536) % 256,
                     math.floor(v / 256) % 256, v % 256)
end
