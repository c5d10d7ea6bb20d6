"""The shared store: the :class:`~mailfilter.store.Store` protocol on Redis or Redis Cluster.

Several mail hosts check and record against one Redis.  Records expire by Redis TTL, equal
to the retention period, so :meth:`RedisStore.prune` has nothing to do.

Keys (``P`` is the key prefix, ``{T}`` a partition's hash tag; binary parts are raw bytes):

====================  ===========  ===============================================  =========
key                   type         members / value                                  TTL
====================  ===========  ===============================================  =========
``P meta``            string       JSON: schema, fingerprint parameters, partitions  none
``P{T}p``             string       id of the parameters (checked by every script)   none
``P{T}n``             string       INCR counter of the partition's record ids       none
``P{T}d<id>``         string       encoded :class:`~mailfilter.store.Record`        retention
``P{T}m<msgid key>``  sorted set   id, scored by last seen                          retention
``P{T}g<digest>``     sorted set   id, scored by last seen                          retention
``P{T}h<sum>``        sorted set   histogram (36 bytes) + id, scored by last seen   retention
``P{T}s<hash>``       sorted set   id, scored by last seen (newest 1000 kept)       retention
``P{T}k<chunk>``      sorted set   id, scored by last seen (newest 1000 kept)       retention
``P{T}t``             sorted set   id, scored by last seen (the ``by_time`` index)  retention
``P{T}c``             hash         ``day:verdict`` → count                          none
====================  ===========  ===============================================  =========

A *partition* is a complete index over part of the records; all its keys share one hash tag,
so one Lua script can read or write all of them on one node.  A single server has one
partition.  On a Redis Cluster the store has one partition per primary (or ``?partitions=N``
in the URL when it is created), with tags chosen so that their slots fall in evenly spaced
slot ranges; a record goes to the partition of its body digest (so exact repeats meet in
one script), and a check runs the lookup script on every partition in one pipelined round.

Round trips: a check is one ``EVALSHA`` of the lookup script (on a cluster: one per partition,
sent to all nodes at once).  Recording is one ``EVALSHA`` of the write script: inside
:meth:`RedisStore.atomically` the verdict counter and a touch are buffered and travel with
the add (or are sent together at the end).  Check and record are two round trips, not one
transaction: two hosts receiving the same message in the same millisecond can both call it
unique.  The write script makes that harmless for exact duplicates: ``add`` is idempotent
by digest (a record with the same digest and some content is touched instead, and its id
returned), so the store still ends up with one record, counted twice.
:meth:`RedisStore.lookup_or_add` checks and, for a message nothing matches, records in one
script: one round trip for a new message.  On a single server each thread sends its scripts
over a connection of its own (redis-py's client costs more per call than the round trip).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from string import Template
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import xxhash

from mailfilter.names import Kind
from mailfilter.store import (
    SCHEMA_VERSION,
    Candidates,
    Probe,
    Record,
    StoreError,
    StoreMismatch,
    message_id_key,
)

try:  # the optional dependency: pip install 'dupfilter[redis]'
    import redis
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.cluster import RedisCluster
    from redis.crc import key_slot
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry
except ImportError:  # pragma: no cover - reported when a redis:// store is opened
    redis = None  # type: ignore[assignment]

T = TypeVar("T")
log = logging.getLogger(__name__)

KEEP_POSTINGS = 1000   # newest ids kept per shingle/chunk hash (a footer must not grow forever)
_NEWEST_EXACT = 16     # ids read per Message-ID and per digest, as LMDB
_SLOTS = 16384
_BATCH = 500
_MISMATCH = "DUPFILTER-MISMATCH"
_VERDICTS = tuple(Kind)


# -- the record layout, as the Lua scripts need it ----------------------------------------

_FIELDS = ("version", "flags", "first_seen", "last_seen", "seen", "histogram", "histogram_sum",
           "histogram_chars", "shingle_count", "word_count", "digest", "message_id_key",
           "n_sketch", "n_chunks", "n_recipients", "n_message_id")


@dataclass(frozen=True)
class _Layout:
    """Byte offsets of a :meth:`Record.encode` result, measured from the encoder itself."""

    header: int
    sketch_width: int
    chunk_width: int
    recipient_width: int
    recipients_max: int
    offsets: dict[str, int]


def _measure_layout() -> _Layout:
    from mailfilter.store import _HEADER  # the header format is the store package's own

    tokens = re.findall(r"(\d*)([a-zA-Z?])", _HEADER.format.lstrip("<>!=@"))
    if len(tokens) != len(_FIELDS):
        raise StoreError("mailfilter.store.redis does not know this record header layout")
    offsets, position = {}, 0
    order = _HEADER.format[0] if _HEADER.format[0] in "<>!=@" else "@"
    for name, (count, code) in zip(_FIELDS, tokens, strict=True):
        offsets[name] = position
        position += struct.calcsize(f"{order}{count}{code}")

    def size(**fields: Any) -> int:
        base = dict(histogram=bytes(36), histogram_sum=0, histogram_chars=0, sketch=(),
                    shingle_count=0, word_count=0, digest=bytes(16), message_id_key=None,
                    message_id=None)
        base.update(fields)
        return len(Record(**base).encode())

    header = size()
    probe = Record(histogram=bytes(36), histogram_sum=0, histogram_chars=0, sketch=(),
                   shingle_count=0, word_count=0, digest=bytes(16), message_id_key=None,
                   message_id=None, chunks=((0x0102030405060708, 9),))
    if probe.encode()[header:header + 8] != bytes.fromhex("0102030405060708"):
        raise StoreError("mailfilter.store.redis expects a chunk entry to start with its digest")
    recipient_width = size(recipients=(1,)) - header
    layout = _Layout(header=header, sketch_width=size(sketch=(1,)) - header,
                     chunk_width=size(chunks=((1, 1),)) - header,
                     recipient_width=recipient_width,
                     recipients_max=(size(recipients=tuple(range(1, 1000))) - header)
                     // recipient_width, offsets=offsets)
    if offsets["seen"] != offsets["last_seen"] + 4 or header != position:
        raise StoreError("mailfilter.store.redis does not know this record header layout")
    return layout


_LAYOUT = _measure_layout()

# -- Lua ------------------------------------------------------------------------------------

_PRELUDE = Template(r"""
local base = KEYS[1]
local byte, sub = string.byte, string.sub
local HEADER, SW, CW, RW, MAXR = $header, $sketch_width, $chunk_width, $recipient_width, $rmax
local O_LAST, O_SEEN, O_HIST, O_SUM = $o_last, $o_seen, $o_hist, $o_sum
local O_WORDS, O_DIGEST, O_MSGID = $o_words, $o_digest, $o_msgid
local O_NS, O_NC, O_NR = $o_ns, $o_nc, $o_nr
local KEEP, NEWEST = $keep, $newest
local ZERO16 = string.rep('\0', 16)
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
""").substitute(
    header=_LAYOUT.header, sketch_width=_LAYOUT.sketch_width, chunk_width=_LAYOUT.chunk_width,
    recipient_width=_LAYOUT.recipient_width, rmax=_LAYOUT.recipients_max,
    o_last=_LAYOUT.offsets["last_seen"], o_seen=_LAYOUT.offsets["seen"],
    o_hist=_LAYOUT.offsets["histogram"], o_sum=_LAYOUT.offsets["histogram_sum"],
    o_words=_LAYOUT.offsets["word_count"], o_digest=_LAYOUT.offsets["digest"],
    o_msgid=_LAYOUT.offsets["message_id_key"], o_ns=_LAYOUT.offsets["n_sketch"],
    o_nc=_LAYOUT.offsets["n_chunks"], o_nr=_LAYOUT.offsets["n_recipients"],
    keep=KEEP_POSTINGS, newest=_NEWEST_EXACT)

# ARGV: params id, message-id key or '', digest, histogram, sum, window, max positions,
# posting cap, max candidates, min shared, common threshold, then the sketch hashes, the
# tail hashes and the chunk digests, each list as one string of fixed-width big-endian
# values, 1 when the store has several partitions, and the most histogram candidates.
# The reply is flat (see RedisStore._parse_lookup).
#
# Every redis.call and every string the script makes costs a microsecond or more, so the
# script reads only what can matter: a posting key is read only when enough of the
# message's keys exist for a candidate to share min_shared of them; the posting counts of
# the last-line hashes (boilerplate) only when some record is returned (they only matter
# for comparing records; with several partitions always, as the client adds them up);
# and the records of all candidates come in one MGET.
_LOOKUP_BODY = r"""
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
local sketch, skeys = split(ARGV[12], SW, 's')
local _, ckeys = split(ARGV[14], 8, 'k')
local ntail = #ARGV[13] / SW
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

local mids = mkey ~= '' and redis.call('ZREVRANGE', base .. 'm' .. mkey, 0, NEWEST - 1) or {}
local dids = redis.call('ZREVRANGE', base .. 'g' .. digest, 0, NEWEST - 1)

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
  if tail == nil then tail = split(ARGV[13], SW) end
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
"""
_LOOKUP_REPLY = r"""
out[#out + 1] = #order
for _, id in ipairs(order) do out[#out + 1] = id; out[#out + 1] = docs[id] end
"""

# ARGV: params id, retention seconds, index size, partitions, this partition, then ops:
#   c FIELD | t ID WHEN RECIPIENTS | a RECORD | f ID
# Reply: {1 if the partition's parameter key was (re)created else 0, one result per op}.
# The write functions; they need ``params``, ``ret``, ``index_size``, ``parts``, ``part``.
_WRITE_FUNCTIONS = r"""
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
  local mkey = sub(data, O_MSGID + 1, O_MSGID + 16)
  if mkey ~= ZERO16 then keys[#keys + 1] = base .. 'm' .. mkey end
  local ns, nc = u16(data, O_NS), u16(data, O_NC)
  for j = 0, math.min(ns, index_size) - 1 do
    keys[#keys + 1] = base .. 's' .. sub(data, HEADER + j * SW + 1, HEADER + (j + 1) * SW)
  end
  local coff = HEADER + ns * SW
  for j = 0, nc - 1 do
    keys[#keys + 1] = base .. 'k' .. sub(data, coff + j * CW + 1, coff + j * CW + 8)
  end
  return keys, base .. 'h' .. u16(data, O_SUM), sub(data, O_HIST + 1, O_HIST + 36)
end

-- Postings keep their newest KEEP ids (older ones point at expired records or are never
-- read); the sum window and the time index, which are read whole, are trimmed by time.
-- The trims run for one record in 16 (a list holds about KEEP + 16 ids at most; the time
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
    if trim then redis.call('ZREMRANGEBYRANK', key, 0, -KEEP - 1) end
    expire(key)
  end
  for _, pair in ipairs({{sum_key, hist .. id}, {base .. 't', id}}) do
    redis.call('ZADD', pair[1], when, pair[2])
    if trim then redis.call('ZREMRANGEBYSCORE', pair[1], '-inf', '(' .. (when - ret)) end
    expire(pair[1])
  end
end

local function recipients_of(data)
  local roff = HEADER + u16(data, O_NS) * SW + u16(data, O_NC) * CW
  return roff, u16(data, O_NR)
end

local function touch(id, when, recips)
  local key = base .. 'd' .. id
  local data = redis.call('GET', key)
  if not data then return 0 end
  local last = math.max(u32(data, O_LAST), when)
  data = sub(data, 1, O_LAST) .. p32(last) .. p32(u32(data, O_SEEN) + 1) .. sub(data, O_SEEN + 5)
  local roff, nr = recipients_of(data)
  local known, list, added = {}, {}, false
  for j = 0, nr - 1 do
    local r = sub(data, roff + j * RW + 1, roff + (j + 1) * RW)
    known[r] = true
    list[#list + 1] = r
  end
  for j = 0, #recips / RW - 1 do
    local r = sub(recips, j * RW + 1, (j + 1) * RW)
    if not known[r] then known[r] = true; list[#list + 1] = r; added = true end
  end
  if added then
    while #list > MAXR do table.remove(list, 1) end
    data = sub(data, 1, O_NR) .. p16(#list) .. sub(data, O_NR + 3, roff) .. table.concat(list)
           .. sub(data, roff + nr * RW + 1)
  end
  redis.call('SET', key, data, 'EX', ret)
  index_all(id, data, last)
  return 1
end

local function has_content(data) return u32(data, O_WORDS) > 0 or u16(data, O_NC) > 0 end

local function add(data)
  local when = u32(data, O_LAST)
  if has_content(data) then
    local digest = sub(data, O_DIGEST + 1, O_DIGEST + 16)
    for _, id in ipairs(redis.call('ZREVRANGE', base .. 'g' .. digest, 0, NEWEST - 1)) do
      local old = redis.call('GET', base .. 'd' .. id)
      if old and has_content(old) then
        local roff, nr = recipients_of(data)
        touch(id, when, sub(data, roff + 1, roff + nr * RW))
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

"""
_WRITE_OPS = r"""
local params, ret, index_size = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local parts, part = tonumber(ARGV[4]), tonumber(ARGV[5])
""" + _WRITE_FUNCTIONS + r"""
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
"""

_LOOKUP = "#!lua flags=no-writes\n" + _PRELUDE + _LOOKUP_BODY + _LOOKUP_REPLY + "return out\n"
_WRITE = _PRELUDE + _WRITE_OPS

# The lookup's ARGV, then: retention, index size, partitions, partition, counter field and
# a record.  When the lookup found no record at all (so the verdict can only be "unique"),
# the record is added and the verdict counted in the same script: one round trip for a new
# message.  The reply is the lookup's plus the new id (0: nothing was added).
_LOOKUP_ADD = _PRELUDE + _LOOKUP_BODY + r"""
local ret, index_size = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
local parts, part, field, record = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]),
  ARGV[at + 4], ARGV[at + 5]
local params = ARGV[1]
""" + _WRITE_FUNCTIONS + r"""
local added = 0
if #order == 0 then
  local bound = bind_parameters()
  if type(bound) == 'table' then return bound end
  redis.call('HINCRBY', base .. 'c', field, 1)
  added = add(record)
  if bound == 1 then added = -added end
end
""" + _LOOKUP_REPLY + r"""
out[#out + 1] = added
return out
"""


# -- helpers ---------------------------------------------------------------------------------

_FORMATS = {4: "I", 8: "Q"}


def _pack(values: Sequence[int], width: int) -> bytes:
    """Fixed-width big-endian values as one string (one struct call, not one per value)."""
    if width in _FORMATS:
        return struct.pack(f">{len(values)}{_FORMATS[width]}", *values)
    return b"".join(value.to_bytes(width, "big") for value in values)


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and ``stats``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _split_options(url: str) -> tuple[str, dict[str, str]]:
    """The URL for redis-py, and dupfilter's own query options (``partitions``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in ("partitions",)}
    rest = [(k, v) for k, v in query if k not in ours]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def partition_tags(count: int) -> list[str]:
    """Hash tags whose slots fall in ``count`` evenly spaced slot ranges (one per node when
    the cluster's slots were split evenly, as ``redis-cli --cluster create`` does)."""
    tags = []
    for index in range(count):
        low, high = index * _SLOTS // count, (index + 1) * _SLOTS // count
        for attempt in range(1 << 20):
            tag = f"{index}" if attempt == 0 else f"{index}.{attempt}"
            if low <= key_slot(tag.encode()) < high:
                tags.append(tag)
                break
    return tags


@dataclass
class _Partition:
    """One hash tag's worth of keys."""

    index: int
    tag: str
    base: bytes     # prefix + {tag}: every key of the partition starts with it


@dataclass
class _Op:
    """One buffered write: its script arguments and the partition it belongs to."""

    partition: int | None
    args: tuple[bytes | str | int, ...]


class RedisStore:
    """Redis (or Redis Cluster) implementation of :class:`mailfilter.store.Store`."""

    def __init__(self, location: str, parameters: dict[str, object], *,
                 key_prefix: str = "dupfilter:", timeout: float = 2.0,
                 retention_seconds: float = 30 * 86400, create: bool = True,
                 readonly: bool = False) -> None:
        if redis is None:
            raise StoreError("a redis:// store needs the redis package: "
                             "pip install 'dupfilter[redis]' (and hiredis for speed)")
        if "{" in key_prefix or "}" in key_prefix:
            raise StoreError(f"Redis key prefix {key_prefix!r} must not contain braces "
                             "(dupfilter puts its own hash tags in the keys)")
        self.location = masked(location)
        self.readonly = readonly
        self.prefix = key_prefix.encode()
        self.retention = max(1, math.ceil(retention_seconds))
        self.index_size = int(parameters.get("index_size", 1 << 30))  # type: ignore[arg-type]
        self.parameters = parameters
        self._parameters_json = json.dumps(parameters, sort_keys=True)
        self.parameters_id = xxhash.xxh3_64_hexdigest(
            f"{SCHEMA_VERSION}:{self._parameters_json}".encode()).encode()
        self._local = threading.local()
        self._connections: list[Any] = []    # each thread's own (see _round)
        self._connections_lock = threading.Lock()
        url, options = _split_options(location)
        self.cluster = False
        self.client = self._connect(url, timeout)
        self._scripts = {name: (source, hashlib.sha1(source.encode()).hexdigest())
                         for name, source in (("lookup", _LOOKUP), ("write", _WRITE),
                                              ("lookup_add", _LOOKUP_ADD))}
        try:
            self._bind(options, create)
        except BaseException:
            self.close()
            raise

    # -- connection ------------------------------------------------------------------------

    def _connect(self, url: str, timeout: float) -> Any:
        common = dict(socket_timeout=timeout, socket_connect_timeout=timeout,
                      retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), 1))
        with self._errors("connecting"):
            client = redis.Redis.from_url(url, **common)
            try:
                info = client.info("cluster")
            except ResponseError:  # INFO not allowed for this user: take it as one server
                info = {}
            except BaseException:
                client.close()
                raise
            if not info.get("cluster_enabled"):
                return client
            client.close()
            self.cluster = True
            return RedisCluster.from_url(url, **common)

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn redis-py's exceptions into :class:`StoreError` naming the server."""
        try:
            yield
        except ResponseError as error:
            text = str(error)
            if text.startswith(_MISMATCH):
                stored = text[len(_MISMATCH):].strip()
                raise StoreMismatch(
                    f"store {self.location} holds records built with other fingerprint "
                    f"parameters (id {stored}, configured {self.parameters_id.decode()}); "
                    "use those settings or another key prefix") from None
            raise StoreError(f"Redis at {self.location}: {doing} failed: {text}") from None
        except (RedisError, RedisClusterException, OSError) as error:
            raise StoreError(f"cannot reach Redis at {self.location} ({doing}): "
                             f"{error or type(error).__name__}") from None

    def _bind(self, options: dict[str, str], create: bool) -> None:
        """Read (or write) the meta key; refuse other fingerprint parameters."""
        meta_key = self.prefix + b"meta"
        with self._errors("reading the store's parameters"):
            stored = self.client.get(meta_key)
            if stored is None:
                if not create or self.readonly:
                    raise StoreError(f"no dupfilter store at {self.location} (no key "
                                     f"{meta_key.decode()}; deliver a message to create one)")
                count = self._partition_count(options.get("partitions"))
                meta = {"schema": SCHEMA_VERSION, "parameters": json.loads(
                    self._parameters_json), "partitions": count,
                    "tags": partition_tags(count), "created": int(time.time())}
                self.client.set(meta_key, json.dumps(meta, sort_keys=True), nx=True)
                stored = self.client.get(meta_key)
        try:
            meta = json.loads(stored)
            schema, have = int(meta["schema"]), meta["parameters"]
            tags = [str(tag) for tag in meta["tags"]]
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{self.location}: key {meta_key.decode()} is not a dupfilter "
                             "store's meta record") from None
        if schema != SCHEMA_VERSION:
            raise StoreMismatch(f"store {self.location} has schema {schema}; this "
                                f"dupfilter reads schema {SCHEMA_VERSION}")
        wanted = json.loads(self._parameters_json)
        if have != wanted:
            differ = sorted(k for k in set(have) | set(wanted) if have.get(k) != wanted.get(k))
            details = ", ".join(f"{k}={have.get(k)!r} (configured {wanted.get(k)!r})"
                                for k in differ)
            raise StoreMismatch(f"store {self.location} was built with other fingerprint "
                                f"parameters: {details}; use those settings or a new store")
        self.partitions = [_Partition(i, tag, self.prefix + b"{" + tag.encode() + b"}")
                           for i, tag in enumerate(tags)]
        self._meta = stored

    def _partition_count(self, wanted: str | None) -> int:
        """``?partitions=N`` of the URL, else one per cluster primary, else one."""
        if not wanted:
            return len(self.client.get_primaries()) if self.cluster else 1
        if not wanted.isdigit() or not 1 <= int(wanted) <= 1024:
            raise StoreError(f"{self.location}: partitions={wanted!r} must be a number "
                             "from 1 to 1024")
        return int(wanted)

    def _restore_meta(self) -> None:
        """Put the meta key back after the server lost its data (restart without persistence)."""
        self.client.set(self.prefix + b"meta", self._meta, nx=True)

    # -- scripts ---------------------------------------------------------------------------

    def _load(self, name: str) -> None:
        source, sha = self._scripts[name]
        loaded = self.client.script_load(source)
        if loaded != sha:  # pragma: no cover - redis computes the same SHA-1
            self._scripts[name] = (source, loaded)

    def _run(self, name: str, calls: Sequence[tuple[_Partition, Sequence[Any]]]) -> list[Any]:
        """Run script ``name`` once per (partition, args), all in one round trip."""
        for attempt in range(2):
            sha = self._scripts[name][1]
            commands = [("EVALSHA", sha, 1, partition.base, *args) for partition, args in calls]
            try:
                replies = self._cluster_round(calls, commands) if self.cluster \
                    else self._round(commands)
            except NoScriptError:
                if attempt:
                    raise
                self._load(name)
                continue
            missing = any(isinstance(r, NoScriptError) for r in replies)
            if missing and not attempt:
                self._load(name)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies
        raise StoreError(f"Redis at {self.location} would not keep the {name} script")

    def _cluster_round(self, calls: Sequence[tuple[_Partition, Sequence[Any]]],
                       commands: list[tuple[Any, ...]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for (partition, _args), command in zip(calls, commands, strict=True):
            # Routed by the known slot: without it redis-py's cluster pipeline asks a node
            # for the keys of every EVALSHA first (COMMAND GETKEYS).
            pipe.execute_command(*command,
                                 target_nodes=self.client.get_node_from_key(partition.base))
        return pipe.execute(raise_on_error=False)

    def _round(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """``commands`` in one round trip on this thread's own connection to the server.

        On the hot path redis-py's client costs about 40 µs a call (connection pool, retry
        wrapper, instrumentation) against 30 µs for the round trip itself; a dead connection
        is replaced and the round repeated once, as the client's retry would.  Error replies
        come back in the list, in place.
        """
        for attempt in range(2):
            connection = getattr(self._local, "connection", None)
            if connection is None:
                connection = self.client.connection_pool.make_connection()
                self._local.connection = connection
                with self._connections_lock:
                    self._connections.append(connection)
            try:
                if len(commands) == 1:
                    connection.send_command(*commands[0])
                else:
                    connection.send_packed_command(connection.pack_commands(commands))
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(connection.read_response())
                    except ResponseError as error:
                        replies.append(error)
                return replies
            except (RedisConnectionError, RedisTimeoutError, OSError):
                connection.disconnect()
                self._local.connection = None
                with self._connections_lock:
                    self._connections.remove(connection)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    # -- lookup ----------------------------------------------------------------------------

    def _pack_hash(self, value: int) -> bytes:
        return value.to_bytes(_LAYOUT.sketch_width, "big")

    def _lookup_args(self, probe: Probe) -> list[Any]:
        parts = len(self.partitions)
        common_postings = probe.common_postings
        # Hashes travel as one string per list (fewer arguments to pack and to convert).
        width = _LAYOUT.sketch_width
        return [
            self.parameters_id, probe.message_id_key or b"", probe.digest, probe.histogram,
            probe.histogram_sum, probe.histogram_window, probe.histogram_max_positions,
            max(1, probe.posting_cap), max(1, probe.max_candidates), probe.min_shared,
            # On a cluster each partition sees about 1/P of the records sharing a hash.
            max(1, math.ceil(common_postings / parts)) if common_postings < 1 << 62
            else common_postings,
            _pack(probe.sketch_index, width), _pack(probe.tail_hashes, width),
            _pack(probe.chunk_index, 8), 1 if parts > 1 else 0,
            max(1, probe.histogram_limit)]

    def _candidates(self, probe: Probe, replies: list[Any]) -> Candidates:
        result = Candidates()
        tail_counts = [0] * len(probe.tail_hashes)
        for reply in replies:
            self._parse_lookup(reply, result, tail_counts)
        if probe.tail_hashes:
            result.common = frozenset(v for v, n in zip(probe.tail_hashes, tail_counts,
                                                        strict=True)
                                      if n >= probe.common_postings)
        if len(self.partitions) > 1:
            self._trim(result, probe.max_candidates, probe.histogram_limit)
        return result

    def lookup(self, probe: Probe) -> Candidates:
        """Every index for ``probe`` in one round trip (one script per partition)."""
        self._flush()
        args = self._lookup_args(probe)
        with self._errors("lookup"):
            replies = self._run("lookup", [(p, args) for p in self.partitions])
        return self._candidates(probe, replies)

    def lookup_or_add(self, probe: Probe, record: Record) -> Candidates:
        """:meth:`lookup`, and when it finds no record at all, add ``record`` and count a
        "unique" verdict in the same script: one round trip for a new message.

        ``record.doc_id`` is set when it was added (else left 0: record as usual).  On a
        store of several partitions this is a plain lookup (a partition cannot know that
        the others found nothing).
        """
        if len(self.partitions) > 1 or self.readonly:
            return self.lookup(probe)
        self._flush()
        partition = self.partitions[0]
        args = self._lookup_args(probe) + [
            self.retention, self.index_size, 1, 0, f"{int(record.first_seen) // 86400}:unique",
            record.encode()]
        with self._errors("lookup"):
            reply = self._run("lookup_add", [(partition, args)])[0]
            added = int(reply[-1])
            if added < 0:
                self._restore_meta()
        if added:
            record.doc_id = abs(added)
        return self._candidates(probe, [reply[:-1]])

    @staticmethod
    def _parse_lookup(reply: list[Any], result: Candidates, tail_counts: list[int]) -> None:
        items = iter(reply)

        def ids() -> list[int]:
            return [int(next(items)) for _ in range(int(next(items)))]

        def scored() -> dict[int, int]:
            return {int(next(items)): int(next(items)) for _ in range(int(next(items)))}

        result.by_message_id.extend(ids())
        result.by_digest.extend(ids())
        result.histogram_window_size += int(next(items))
        result.by_histogram.update(scored())
        for index in range(int(next(items))):
            tail_counts[index] += int(next(items))
        result.by_shingle.update(scored())
        result.by_chunk.update(scored())
        for _ in range(int(next(items))):
            doc_id = int(next(items))
            result.records[doc_id] = Record.decode(doc_id, next(items))

    @staticmethod
    def _trim(result: Candidates, limit: int, histogram_limit: int) -> None:
        """Partitions each returned up to ``limit`` candidates per index (``histogram_limit``
        for the histogram window): keep the best."""
        result.by_histogram = dict(sorted(result.by_histogram.items(),
                                          key=lambda item: (item[1], item[0]))[:histogram_limit])
        result.by_shingle = dict(sorted(result.by_shingle.items(),
                                        key=lambda item: -item[1])[:limit])
        result.by_chunk = dict(sorted(result.by_chunk.items(), key=lambda item: -item[1])[:limit])
        wanted = (set(result.by_message_id) | set(result.by_digest) | set(result.by_histogram)
                  | set(result.by_shingle) | set(result.by_chunk))
        result.records = {k: v for k, v in result.records.items() if k in wanted}

    # -- writing ---------------------------------------------------------------------------

    def _partition_of_digest(self, digest: bytes) -> int:
        return int.from_bytes(digest[:8], "big") % len(self.partitions)

    def _partition_of_id(self, doc_id: int) -> int:
        return doc_id % len(self.partitions)

    def _pending(self) -> list[_Op] | None:
        return getattr(self._local, "pending", None)

    def _write(self, ops: list[_Op]) -> dict[int, list[Any]]:
        """Send ``ops`` (one write script per partition, one round trip); replies by partition."""
        if self.readonly:
            raise StoreError(f"store {self.location} is open read-only")
        groups: dict[int, list[_Op]] = {}
        floating = [op for op in ops if op.partition is None]
        for op in ops:
            if op.partition is not None:
                groups.setdefault(op.partition, []).append(op)
        if floating:
            target = next(iter(groups), 0)
            groups[target] = floating + groups.get(target, [])
        calls = []
        for index, group in groups.items():
            args: list[Any] = [self.parameters_id, self.retention, self.index_size,
                               len(self.partitions), index]
            for op in group:
                args.extend(op.args)
            calls.append((self.partitions[index], args))
        with self._errors("recording"):
            replies = self._run("write", calls)
            if any(reply[0] for reply in replies):
                self._restore_meta()
        return {index: reply[1:] for (index, _), reply in zip(groups.items(), replies,
                                                              strict=True)}

    def _flush(self) -> None:
        pending = self._pending()
        if pending:
            ops = list(pending)
            pending.clear()
            self._write(ops)

    def _submit(self, op: _Op) -> None:
        pending = self._pending()
        if pending is not None:
            pending.append(op)
        else:
            self._write([op])

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` with its counter bumps and touches sent together with its add.

        Redis has no read-write transaction across a check: lookups are one script, the
        writes of one recording are one script (atomic), and a lost race on an exact
        duplicate is absorbed by the add being idempotent by digest.  Writes buffered when
        ``fn`` raises are dropped.
        """
        if self._pending() is not None:
            return fn()
        self._local.pending = []
        try:
            result = fn()
            self._flush()
            return result
        finally:
            self._local.pending = None

    def add(self, record: Record) -> int:
        """Store ``record`` (or touch the record with its digest); returns the id."""
        index = self._partition_of_digest(record.digest)
        ops = self._pending() or []
        mine = [op for op in ops if op.partition in (None, index)]
        others = [op for op in ops if op.partition not in (None, index)]
        ops.clear()
        add = _Op(index, ("a", record.encode()))
        replies = self._write(others + mine + [add])
        doc_id = int(replies[index][-1])
        record.doc_id = doc_id
        return doc_id

    def touch(self, doc_id: int, when: int, recipients: Sequence[int]) -> None:
        """Count one more sighting, move it to ``when``, add recipients, refresh the TTLs."""
        packed = b"".join(r.to_bytes(_LAYOUT.recipient_width, "big") for r in recipients)
        self._submit(_Op(self._partition_of_id(doc_id), ("t", doc_id, int(when), packed)))

    def count_verdict(self, verdict: str, when: int) -> None:
        """Add one to the day's counter of ``verdict`` (for `dupfilter-db stats`)."""
        name = verdict if verdict in _VERDICTS else "unique"
        self._submit(_Op(None, ("c", f"{int(when) // 86400}:{name}")))

    def prune(self, before: int, *, removed: Callable[[Record], None] | None = None) -> int:
        """Nothing to do: Redis expires records by TTL (the retention period); returns 0
        (and calls ``removed`` for none)."""
        log.info("%s: records expire by Redis TTL (%d s); prune has nothing to do",
                 self.location, self.retention)
        return 0

    def forget(self, doc_ids: Sequence[int]) -> int:
        ops = [_Op(self._partition_of_id(d), ("f", int(d))) for d in doc_ids]
        if not ops:
            return 0
        replies = self._write(ops)
        return sum(int(value) for values in replies.values() for value in values)

    # -- reading for administration --------------------------------------------------------

    def find_message_id(self, message_id: str) -> list[int]:
        key = message_id_key(message_id)
        if key is None:
            return []
        with self._errors("finding a Message-ID"):
            found = self._each(lambda pipe, p: pipe.zrevrange(p.base + b"m" + key, 0, -1))
            ids = [int(i) for members in found for i in members]
            alive = self._each_key([self._doc_key(i) for i in ids], "exists")
        return [i for i, ok in zip(ids, alive, strict=True) if ok]

    def _doc_key(self, doc_id: int) -> bytes:
        return self.partitions[self._partition_of_id(doc_id)].base + b"d" + str(doc_id).encode()

    def _each(self, command: Callable[[Any, _Partition], Any]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for partition in self.partitions:
            command(pipe, partition)
        return pipe.execute()

    def _each_key(self, keys: Sequence[bytes], name: str, *args: Any) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(keys), _BATCH):
            pipe = self.client.pipeline(transaction=False)
            for key in keys[start:start + _BATCH]:
                getattr(pipe, name)(key, *args)
            out.extend(pipe.execute())
        return out

    def get(self, doc_id: int) -> Record | None:
        with self._errors("reading a record"):
            data = self.client.get(self._doc_key(doc_id))
        return Record.decode(doc_id, data) if data else None

    def _ids(self, partition: _Partition) -> Iterator[list[int]]:
        start = 0
        while True:
            with self._errors("listing records"):
                members = self.client.zrange(partition.base + b"t", start, start + _BATCH - 1)
            if not members:
                return
            yield [int(m) for m in members]
            start += len(members)

    def records(self) -> Iterator[Record]:
        for partition in self.partitions:
            for ids in self._ids(partition):
                with self._errors("reading records"):
                    values = self.client.mget([partition.base + b"d" + str(i).encode()
                                               for i in ids])
                for doc_id, data in zip(ids, values, strict=True):
                    if data is not None:
                        yield Record.decode(doc_id, data)

    def stale(self, before: int) -> Iterator[Record]:
        """Records last seen before ``before``, oldest first (``prune`` removes none of
        them: Redis expires records by TTL)."""
        yield from sorted((r for r in self.records() if r.last_seen < before),
                          key=lambda r: (r.last_seen, r.doc_id))

    def stats(self) -> dict[str, object]:
        with self._errors("reading statistics"):
            counts = self._each(lambda pipe, p: pipe.zcard(p.base + b"t"))
            oldest = self._each(lambda pipe, p: pipe.zrange(p.base + b"t", 0, 0,
                                                             withscores=True))
            newest = self._each(lambda pipe, p: pipe.zrange(p.base + b"t", -1, -1,
                                                             withscores=True))
            verdicts = self._each(lambda pipe, p: pipe.hgetall(p.base + b"c"))
            memory = self._memory()
        per_day: dict[int, dict[str, int]] = {}
        for table in verdicts:
            for field_name, value in table.items():
                day, _, name = field_name.decode().partition(":")
                slot = per_day.setdefault(int(day), {})
                slot[name] = slot.get(name, 0) + int(value)
        firsts = [int(s) for pairs in oldest for _, s in pairs]
        lasts = [int(s) for pairs in newest for _, s in pairs]
        return {"backend": "redis", "location": self.location, "records": sum(counts),
                "cluster": self.cluster, "partitions": [p.tag for p in self.partitions],
                "retention_seconds": self.retention, "prune": "by Redis TTL",
                "used_bytes": memory, "oldest": min(firsts) if firsts else None,
                "newest": max(lasts) if lasts else None,
                "verdicts_per_day": {day * 86400: c for day, c in sorted(per_day.items())}}

    def _memory(self) -> int:
        """``used_memory`` of the server, summed over the primaries of a cluster."""
        if self.cluster:
            info = self.client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            return sum(int(node.get("used_memory", 0)) for node in info.values())
        return int(self.client.info("memory").get("used_memory", 0))

    def verify(self) -> list[str]:
        """Parameters per partition, every record decodable with a TTL and all its index
        entries; every index key has a TTL and points only at records that want it."""
        problems: list[str] = []
        with self._errors("verifying"):
            for partition in self.partitions:
                problems.extend(self._verify_partition(partition))
        return problems

    def _verify_partition(self, partition: _Partition) -> list[str]:
        problems: list[str] = []
        name = f"partition {{{partition.tag}}}"
        have = self.client.get(partition.base + b"p")
        if have is not None and have != self.parameters_id:
            problems.append(f"{name}: parameters {have.decode()} differ from the meta key's")
        base = partition.base
        wanted: set[tuple[bytes, bytes]] = set()
        for ids in self._ids(partition):
            keys = [base + b"d" + str(i).encode() for i in ids]
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.get(key)
                pipe.ttl(key)
            replies = pipe.execute()
            for doc_id, data, ttl in zip(ids, replies[::2], replies[1::2], strict=True):
                if data is None:
                    continue  # expired; the time index forgets it at the next write
                try:
                    record = Record.decode(doc_id, data)
                except (StoreError, struct.error) as error:
                    problems.append(f"{name}: record {doc_id} cannot be decoded: {error}")
                    continue
                if self._partition_of_id(doc_id) != partition.index:
                    problems.append(f"{name}: record {doc_id} belongs to another partition")
                if ttl < 0 or ttl > self.retention:
                    problems.append(f"{name}: record {doc_id} has TTL {ttl}, expected "
                                    f"1..{self.retention}")
                wanted.update(self._entries(base, record))
        # Every index entry of a live record exists.
        entries = sorted(wanted)
        for start in range(0, len(entries), _BATCH):
            pipe = self.client.pipeline(transaction=False)
            for key, member in entries[start:start + _BATCH]:
                pipe.zscore(key, member)
            for (key, member), score in zip(entries[start:start + _BATCH], pipe.execute(),
                                            strict=True):
                if score is None:
                    problems.append(f"{name}: record {self._member_id(member)} lacks its "
                                    f"index entry {key[len(base):].hex()}")
        # Every index key has a TTL; its members are wanted, or point at expired records.
        pattern = re.sub(rb"([*?\[\]\\])", rb"\\\1", base) + b"[mghsk]*"
        for key in self._scan(pattern):
            ttl = self.client.ttl(key)
            if ttl < 0:
                problems.append(f"{name}: index key {key[len(base):].hex()} has no TTL")
            for member in self.client.zrange(key, 0, -1):
                if (key, member) in wanted:
                    continue
                doc_id = self._member_id(member)
                if self.client.exists(base + b"d" + str(doc_id).encode()):
                    problems.append(f"{name}: index entry {key[len(base):].hex()} → {doc_id} "
                                    "has no record that wants it")
        return problems

    def _scan(self, pattern: bytes) -> Iterator[bytes]:
        if self.cluster:
            yield from self.client.scan_iter(match=pattern, count=1000,
                                             target_nodes=RedisCluster.PRIMARIES)
        else:
            yield from self.client.scan_iter(match=pattern, count=1000)

    @staticmethod
    def _member_id(member: bytes) -> int:
        return int(member[36:]) if len(member) > 36 else int(member)

    def _entries(self, base: bytes, record: Record) -> Iterator[tuple[bytes, bytes]]:
        """(key, member) of every index entry of ``record``, as the write script makes them."""
        member = str(record.doc_id).encode()
        yield base + b"g" + record.digest, member
        if record.message_id_key:
            yield base + b"m" + record.message_id_key, member
        for value in record.sketch[:self.index_size]:
            yield base + b"s" + self._pack_hash(value), member
        for digest, _length in record.chunks:
            yield base + b"k" + digest.to_bytes(8, "big"), member
        yield base + b"h" + str(record.histogram_sum).encode(), record.histogram + member
        yield base + b"t", member

    def close(self) -> None:
        with self._connections_lock:
            for connection in self._connections:
                connection.disconnect()
            self._connections.clear()
        try:
            self.client.close()
        except (RedisError, RedisClusterException, OSError):
            pass
