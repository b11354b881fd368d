-- The prelude of the sluice function library (scripts.go loads it once,
-- with every script as a function of it). Each function first calls
-- bind(KEYS): KEYS[1] is the queue's key prefix, every key of one queue
-- starts with it (see keys.go), so a script only ever needs that prefix to
-- find them. The key names are library-level locals that bind rebinds:
-- Redis runs one function at a time, to the end, so no call sees another's.
-- Times are integer milliseconds from the server's injected clock (ARGV),
-- never Redis' own TIME, so tests can move time and replicas replay the
-- same effects.
local P         -- the queue's key prefix
local Q         -- hash: m = metadata JSON, s = last seq, x = index keys' keepalive horizon,
                -- i = incarnation, h = the stream's expiry order and r = the
                -- claim cursor (see "The stream area")
local IDS       -- zset id -> seq: every message, in posting order
local EXP       -- zset id -> expiry
local RDY       -- zset id -> seq: free, visible messages (what claims and pops take)
local DLY       -- zset id -> end of delay
local CL        -- zset claim id -> claim expiry
local CH        -- hash claim id -> the claim (claim_read)
local HELD      -- zset id -> expiry of the claim holding it
local K         -- hash seq -> claim id: stream entries a claim holds in place
-- Subscriptions and deliveries: see below.
local SX, SD, SI, SN, DA, DS
-- Moving a queue: see below.
local TI, TC, MV, IM
-- The stream area: see below.
local X, XE
-- What move_state read of the queue hash besides the seal, so the calls
-- after it need not read the hash again: the incarnation (INC), the claim
-- cursor (XR) and the keepalive horizon (QX); QREAD says they are this
-- call's, INCREAD that INC and XR are (read by move_state or incarnation).
-- XPOS is where free_head reads the stream next within this call.
local INC, XR, QX, QREAD, INCREAD, XPOS

local function bind(keys)
  INC, XR, QX, QREAD, INCREAD, XPOS = nil, 0, nil, false, false, nil
  -- The names depend on the prefix alone, and calls on one queue tend to
  -- follow each other: 24 concatenations are a third of an empty call.
  if keys[1] == P then return end
  P = keys[1]
  Q, IDS, EXP, RDY = P .. ':q', P .. ':ids', P .. ':exp', P .. ':rdy'
  DLY, CL, HELD, K, CH = P .. ':dly', P .. ':cl', P .. ':held', P .. ':k', P .. ':ch'
  SX, SD, SI, SN = P .. ':sx', P .. ':sd', P .. ':si', P .. ':sn'
  DA, DS = P .. ':da', P .. ':ds'
  TI, TC, MV, IM = P .. ':ti', P .. ':tc', P .. ':mv', P .. ':im'
  X, XE = P .. ':x', P .. ':xe'
end

-- Work one call may spend on cleanup; what is left waits for the next call
-- (reads filter by time meanwhile, so nothing expired is ever returned).
local BUDGET = 500
local BUDGETS = '500' -- as the argument: a Lua number is formatted per call
-- Index keys get a Redis TTL this far beyond the newest message expiry, so
-- an abandoned queue's indexes vanish on their own while most posts need not
-- renew the TTLs.
local SLACK = 600000

-- digits writes a whole number as a command argument. Redis 7.0 formats
-- every number argument of redis.call with snprintf("%.17g"), which costs
-- about as much as a small command (docs/benchmarks.md, "Numbers passed
-- to Redis as strings"); so the hot scripts pass ARGV's own strings on
-- where they can and write each number they compute once. tostring
-- (Lua's "%.14g") is exact below 1e14; "%.0f" beyond.
local function digits(n)
  if n < 1e14 and n > -1e14 then return tostring(n) end
  return string.format('%.0f', n)
end

local function mkey(id) return P .. ':m:' .. id end

-- Claims. A claim is one field of :ch, claim id -> "ttl grace created
-- expiry ids..." (milliseconds; the ids of the messages it took, space
-- separated), beside its :cl entry: no key per claim, and one HSET for
-- every claim of a merged call. The lapse sweep removes it with its :cl
-- entry; :ch has the index keys' TTL.
-- claim_value is that field's value.
local function claim_value(t, g, c, e, ids)
  return t .. ' ' .. g .. ' ' .. c .. ' ' .. e .. ' ' .. ids
end

-- claim_read returns claim cid as {ttl, grace, created, expiry, ids} (the
-- ids as one string), or nil.
local function claim_read(cid)
  local v = redis.call('HGET', CH, cid)
  if not v then return nil end
  local t, g, c, e, ids = v:match('^(%S+) (%S+) (%S+) (%S+) ?(.*)$')
  return {t, g, c, e, ids}
end

-- claim_drop removes claim cid.
local function claim_drop(cid)
  redis.call('HDEL', CH, cid)
  redis.call('ZREM', CL, cid)
end

-- drop deletes a message and every index entry of it.
local function drop(id)
  redis.call('DEL', mkey(id))
  redis.call('ZREM', IDS, id)
  redis.call('ZREM', EXP, id)
  redis.call('ZREM', RDY, id)
  redis.call('ZREM', DLY, id)
  redis.call('ZREM', HELD, id)
end

-- absent returns which of the given index keys do not exist yet. Every
-- script that creates an index key gives it the horizon as its TTL, so a
-- key that exists has one: only these can need it once the caller has
-- written them. One EXISTS answers the usual case, where all exist, for
-- the one PTTL per key this replaced.
local function absent(...)
  local keys, out = {...}, {}
  if redis.call('EXISTS', unpack(keys)) == #keys then return out end
  for _, key in ipairs(keys) do
    if redis.call('EXISTS', key) == 0 then out[#out + 1] = key end
  end
  return out
end

-- hold_until gives index keys of the queue with prefix p the horizon x:
-- every one when the horizon just moved (renewed), otherwise only the keys
-- in fresh (absent's answer before the caller wrote them), which lack it.
local INDEXES = {':ids', ':exp', ':rdy', ':dly', ':cl', ':held', ':x', ':xe', ':k', ':ch'}
local function hold_until(p, now, x, renewed, fresh)
  if renewed then
    fresh = {}
    for i, suffix in ipairs(INDEXES) do fresh[i] = p .. suffix end
  end
  for _, key in ipairs(fresh) do
    redis.call('PEXPIRE', key, x - now)
  end
end

-- keepalive keeps the index keys of the queue with prefix p alive past
-- expiry e: when e passes the recorded horizon, the horizon moves to
-- e + SLACK.
local function keepalive(p, now, e, fresh)
  local q = p .. ':q'
  local own = p == P and QREAD
  local x = own and QX or tonumber(redis.call('HGET', q, 'x') or '0')
  local renew = e > x
  if renew then
    x = e + SLACK
    redis.call('HSET', q, 'x', x)
    if own then QX = x end
  end
  hold_until(p, now, x, renew, fresh)
end

-- refresh_ttl gives an index key of this queue the keepalive horizon when
-- it has no TTL (a caller just created it). A horizon already past (what
-- the key holds expired long ago, and the caller's cleanup drops it) still
-- gets SLACK: absent trusts that every existing index key has a TTL.
local function refresh_ttl(key, now)
  if redis.call('PTTL', key) == -1 then
    local ttl = tonumber(redis.call('HGET', Q, 'x') or '0') - now
    if ttl <= 0 then ttl = SLACK end
    redis.call('PEXPIRE', key, ttl)
  end
end

-- The stream area. A message posted and not delayed is an entry of the stream :x
-- with id <seq>-0 and fields b body, c created, e expiry, u client: no
-- key, no TTL and no index entry of its own, which is what a stored
-- message costs in the other area (docs/storage.md, "The stream area").
-- Entries above the claim cursor (:q field r) are free and were never
-- claimed: what claims and pops take, in order. A claim holds the entries
-- it takes in place: the cursor moves past them, :k maps each one's seq to
-- the claim's id and :held has its id, scored by the claim's expiry, as
-- for a message hash; every entry at or below the cursor is so held, its
-- claim count 1. Nothing else is written per claimed message, and a
-- delete removes the entry and those two fields. Where a message needs
-- more (a claim that must raise its expiry, a claim that ends without a
-- delete, so the message is free again) the entry becomes a message hash
-- of the key-per-message area first (xpromote), as does every entry a
-- move takes. A pop or delete removes it. Both areas share the queue's
-- sequence, so whoever takes or lists messages merges them by seq.
-- Ids of messages posted here are the queue's incarnation (:q field i, 16
-- hex digits written by the first post, so a queue deleted and created
-- again never reissues an id) and the seq (16 hex digits: a queue moved
-- in from MongoDB continues that backend's sequence, past 2^48), in UUID
-- form; message hashes of such messages keep the id (a delayed one is
-- posted as a hash).
-- Expiry: :q field h holds the largest expiry of any entry so far; an
-- entry that expires before it is out of order and noted in :xe (seq ->
-- expiry). The others expire in stream order, so trimming the head until
-- the first live entry (xtrim) and dropping what :xe says fell due
-- (expire) leaves only live entries: an in-order entry behind a live one
-- expires after it.
-- incarnation returns the bound queue's incarnation, reading it and the
-- claim cursor at most once per call.
local function incarnation()
  if not INCREAD then
    local f = redis.call('HMGET', Q, 'i', 'r')
    INC, XR, INCREAD = f[1], tonumber(f[2] or '0'), true
  end
  return INC
end

-- xprefix is the part of an id that names incarnation inc,
-- "iiiiiiii-iiii-iiii-", made once per incarnation seen rather than per id
-- (Lua strings are interned, so the comparison is of pointers).
local XPRE, XPREOF
local function xprefix(inc)
  if inc ~= XPREOF then
    XPRE, XPREOF = inc:sub(1, 8) .. '-' .. inc:sub(9, 12) .. '-' .. inc:sub(13, 16) .. '-', inc
  end
  return XPRE
end

-- xid is the id of the entry with sequence seq of incarnation inc: the seq
-- in 16 hex digits, split 4-12 (2^48 apart).
local SPLIT = 281474976710656
local function xid(inc, seq)
  local hi = math.floor(seq / SPLIT)
  return xprefix(inc) .. string.format('%04x-%012x', hi, seq - hi * SPLIT)
end

-- xseq is the sequence of the entry id names, or nil when id is not of
-- this queue's incarnation (INC) or not of that form, or names a seq past
-- 2^53 (hi 32, lo 0), which no queue reaches and a Lua number would
-- round. Three substrings per id: deletes read one per message.
local function xseq(id)
  if not INC or #id ~= 36 or id:sub(1, 19) ~= xprefix(INC) then return nil end
  if not id:find('^%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$', 20) then return nil end
  local hi, lo = tonumber(id:sub(20, 23), 16), tonumber(id:sub(25), 16)
  if hi > 32 or (hi == 32 and lo > 0) then return nil end
  return hi * SPLIT + lo
end

-- entry_seq reads the seq out of a stream entry id "<seq>-0".
local function entry_seq(eid) return tonumber(eid:sub(1, -3)) end

-- fields reads a stream entry's field list into a table.
local function fields(kv)
  local f = {}
  for i = 1, #kv, 2 do f[kv[i]] = kv[i + 1] end
  return f
end

-- xmsg is the load form of a live entry (never delayed); k, x and n are
-- its claim id, claim expiry and claim count (xclaim), none by default.
local function xmsg(seq, f, k, x, n)
  return {xid(INC, seq), f.b, f.c, f.e, '0', f.u or '', k or '', x or '0', n or '0'}
end

-- xclaim returns the claim id, claim expiry and claim count of the entry
-- with sequence seq and id id: none above the cursor; at or below it, the
-- claim :k names while :held says it lives (a lapsed one reads as none, as
-- load's does), and a count of 1.
local function xclaim(seq, id, now)
  if seq > XR then return '', '0', '0' end
  local k = redis.call('HGET', K, digits(seq))
  if not k then return '', '0', '1' end
  local x = redis.call('ZSCORE', HELD, id)
  if x and tonumber(x) > now then return k, x, '1' end
  return '', '0', '1'
end

-- xread returns the fields of the entry with sequence seq, or nil.
local function xread(seq)
  local s = digits(seq) .. '-0'
  local r = redis.call('XRANGE', X, s, s)
  if #r == 0 then return nil end
  return fields(r[1][2])
end

-- xdrop removes entries (their seqs as strings) from the stream and :xe.
-- Their :xe members, if any, stay until due: expire's XDEL of an entry
-- already gone changes nothing, and most entries have none, so removing
-- them here would cost every claim a call for nothing.
local function xdrop(seqs)
  if #seqs == 0 then return end
  local eids = {}
  for i, s in ipairs(seqs) do eids[i] = s .. '-0' end
  for i = 1, #eids, 1000 do
    redis.call('XDEL', X, unpack(eids, i, math.min(i + 999, #eids)))
  end
end

-- xtrim drops expired entries from the head of the stream, up to BUDGET,
-- and says whether it reached a live entry or the end (false: the budget
-- ran out first). One entry is read first: the head is nearly always live.
local function xtrim(now)
  local count, left = 1, BUDGET
  while left > 0 do
    local head = redis.call('XRANGE', X, '-', '+', 'COUNT', count)
    local dead = {}
    for _, e in ipairs(head) do
      if tonumber(fields(e[2]).e) > now then break end
      dead[#dead + 1] = e[1]:sub(1, -3)
    end
    xdrop(dead)
    if #dead < #head or #head < count then return true end
    left = left - #dead
    count = math.min(64, left)
  end
  return false
end

-- merged is one page of both areas in seq order (descending with desc):
-- up to n items from z, a sorted set's page read WITHSCORES (seq scores),
-- and x, a stream page in the same direction; {id, seq} for a member,
-- {nil, seq, fields} for an entry. Seqs never repeat between the areas.
local function merged(z, x, n, desc)
  local out, i, j = {}, 1, 1
  while #out < n and (i <= #z or j <= #x) do
    local zs = i <= #z and tonumber(z[i + 1])
    local xs = j <= #x and entry_seq(x[j][1])
    if zs and (not xs or (zs < xs) ~= desc) then
      out[#out + 1] = {z[i], zs}
      i = i + 2
    else
      out[#out + 1] = {nil, xs, fields(x[j][2])}
      j = j + 1
    end
  end
  return out
end

-- free_head returns up to want of the oldest free messages of both areas,
-- merged by seq: each item is {id, seq} for a message hash, taken out of
-- :rdy, or {nil, seq, fields} for an entry above the cursor, which stays
-- in the stream (the next call in this script reads past it). The caller
-- decides what becomes of each: an entry it does not hold in place it
-- removes (xdrop), before it moves the cursor past it.
local function free_head(want)
  incarnation()
  XPOS = XPOS or XR
  local from = XPOS > 0 and '(' .. digits(XPOS) .. '-0' or '-'
  local r = redis.call('ZRANGE', RDY, '0', digits(want - 1), 'WITHSCORES')
  local x = redis.call('XRANGE', X, from, '+', 'COUNT', digits(want))
  local out, taken = merged(r, x, want, false), {}
  for _, it in ipairs(out) do
    if it[1] then
      taken[#taken + 1] = it[1]
    else
      XPOS = it[2]
    end
  end
  if #taken > 0 then redis.call('ZREM', RDY, unpack(taken)) end
  return out
end

-- expire drops messages whose time is up: message hashes, and entries of
-- the stream area that expire out of order (the others go by xtrim).
-- ns is now as a string, when the caller has it.
local function expire(now, ns)
  ns = ns or digits(now)
  local dead = redis.call('ZRANGEBYSCORE', EXP, '-inf', ns, 'LIMIT', '0', BUDGETS)
  for _, id in ipairs(dead) do drop(id) end
  local late = redis.call('ZRANGEBYSCORE', XE, '-inf', ns, 'LIMIT', '0', BUDGETS)
  if #late > 0 then
    xdrop(late)
    redis.call('ZREM', XE, unpack(late))
  end
end

-- xpromote turns the entry with sequence seq (fields f, id id) that a
-- claim holds in place into a message hash with claim count 1: still held
-- by claim k until x when k is given, its expiry raised to e when e is
-- later than its own, else free (the caller adds it to :rdy). The entry
-- and its :k field go; its :held member, the same id, stays for the
-- caller to keep or remove.
local function xpromote(seq, f, id, now, k, x, e)
  local ss, es = digits(seq), f.e
  if e and e > tonumber(es) then es = digits(e) end
  local mk = mkey(id)
  local fresh = absent(IDS, EXP)
  if k then
    redis.call('HSET', mk, 'b', f.b, 'c', f.c, 'e', es, 's', ss, 'u', f.u or '', 'n', '1', 'k', k, 'x', x)
  else
    redis.call('HSET', mk, 'b', f.b, 'c', f.c, 'e', es, 's', ss, 'u', f.u or '', 'n', '1')
  end
  redis.call('PEXPIRE', mk, digits(tonumber(es) - now))
  redis.call('ZADD', IDS, ss, id)
  redis.call('ZADD', EXP, es, id)
  keepalive(P, now, tonumber(es), fresh)
  redis.call('HDEL', K, ss)
  xdrop({ss})
end

-- xfree frees the message id when it is an entry held in place (by claim
-- cid, when given) and says whether it was: a live one becomes a free
-- message hash in :rdy, an expired one goes. Its :held member is the
-- caller's.
local function xfree(id, now, cid)
  incarnation()
  local seq = xseq(id)
  if not seq or seq > XR then return false end
  local ss = digits(seq)
  local k = redis.call('HGET', K, ss)
  if not k or (cid and k ~= cid) then return false end
  local f = xread(seq)
  if f and tonumber(f.e) > now then
    xpromote(seq, f, id, now)
    redis.call('ZADD', RDY, ss, id)
  else
    redis.call('HDEL', K, ss)
    xdrop({ss})
  end
  return true
end

-- advance applies what fell due by now, within BUDGET per step: lapsed
-- claims free their messages, delays end, expired messages go. It returns
-- how many claims lapsed (reported as claim expirations).
local function advance(now)
  -- The time goes to Redis as one string: a Lua number would be formatted
  -- again for each call (see digits).
  local ns = digits(now)
  local lapsed = redis.call('ZRANGEBYSCORE', CL, '-inf', ns, 'LIMIT', '0', BUDGETS)
  if #lapsed > 0 then
    redis.call('HDEL', CH, unpack(lapsed))
    redis.call('ZREM', CL, unpack(lapsed))
  end

  local held = redis.call('ZRANGEBYSCORE', HELD, '-inf', ns, 'LIMIT', '0', BUDGETS)
  for _, id in ipairs(held) do
    local mk = mkey(id)
    local f = redis.call('HMGET', mk, 's', 'e')
    if f[1] then
      if tonumber(f[2]) > now then
        redis.call('HDEL', mk, 'k', 'x')
        redis.call('ZADD', RDY, f[1], id)
      end
    else
      xfree(id, now)
    end
  end
  if #held > 0 then redis.call('ZREM', HELD, unpack(held)) end

  local due = redis.call('ZRANGEBYSCORE', DLY, '-inf', ns, 'LIMIT', '0', BUDGETS)
  for _, id in ipairs(due) do
    local s = redis.call('ZSCORE', IDS, id)
    if s then redis.call('ZADD', RDY, s, id) end
  end
  if #due > 0 then redis.call('ZREM', DLY, unpack(due)) end
  -- Freed and due messages may have created :rdy afresh, without the TTL
  -- every index carries.
  if #held + #due > 0 then refresh_ttl(RDY, now) end

  expire(now, ns)
  return #lapsed
end

-- load returns a live message as {id, body, created, expires, delay,
-- client, claim id, claim expiry, claim count}, or nil. A lapsed claim
-- reads as no claim even before advance has cleared it. keyof names the
-- message's hash (default mkey; tkey for a batch in transit).
local function load(id, now, keyof)
  local h = redis.call('HMGET', (keyof or mkey)(id), 'b', 'c', 'e', 'd', 'u', 'k', 'x', 'n')
  if not h[1] or tonumber(h[3]) <= now then return nil end
  local k, x = h[6] or '', h[7] or '0'
  if k ~= '' and tonumber(x) <= now then k, x = '', '0' end
  return {id, h[1], h[2], h[3], h[4] or '0', h[5] or '', k, x, h[8] or '0'}
end

-- find is load over both areas: a message hash, else a live entry with
-- its claim (the caller has read the incarnation).
local function find(id, now)
  local m = load(id, now)
  if m then return m end
  local seq = xseq(id)
  if not seq then return nil end
  local f = xread(seq)
  if f and tonumber(f.e) > now then return xmsg(seq, f, xclaim(seq, id, now)) end
  return nil
end

-- ensure records a queue (hash q) in its project's index and the registry
-- the first time anything creates it.
local function ensure(q, index, registry, name, member, meta)
  if redis.call('HSETNX', q, 'm', meta) == 1 then
    redis.call('ZADD', index, 0, name)
    redis.call('SADD', registry, member)
    return 1
  end
  return 0
end

-- split turns the space-separated id list of a claim into a table.
local function split(s)
  local out = {}
  for id in string.gmatch(s or '', '%S+') do out[#out + 1] = id end
  return out
end

-- Subscriptions and deliveries. Per queue: :s:<id> (hash s subscriber,
-- t ttl, o options JSON, e expiry, c confirmed, n needs confirmation), :sx
-- (zset id -> expiry), :sd (the deliverable ones), :si (ids, for paging),
-- :sn (hash subscriber -> id), :n:<message id> (hash b body, t ttl, c
-- created, e expiry, r deliveries still referring to it), :dp:<id> (zset
-- message id -> expiry: the subscription's pending deliveries), :da (hash
-- "<message id>.<id>" -> "attempts|lease token"), :ds (hash of counters).
-- DUE is shared by every queue: "<scope>|<message id>|<id>" -> next
-- attempt, what leases take.
local DUE = 's:due'
local function skey(id) return P .. ':s:' .. id end
local function nkey(mid) return P .. ':n:' .. mid end
local function dpkey(sid) return P .. ':dp:' .. sid end
local function duemember(mid, sid) return P .. '|' .. mid .. '|' .. sid end

-- unref drops one delivery's hold on a notification body.
local function unref(mid)
  if redis.call('HINCRBY', nkey(mid), 'r', -1) <= 0 then redis.call('DEL', nkey(mid)) end
end

-- drop_pending drops up to n (nil: all) of a subscription's pending
-- deliveries and returns how many it dropped.
local function drop_pending(sid, n)
  local mids = redis.call('ZRANGE', dpkey(sid), 0, n and n - 1 or -1)
  for _, mid in ipairs(mids) do
    redis.call('ZREM', DUE, duemember(mid, sid))
    redis.call('HDEL', DA, mid .. '.' .. sid)
    unref(mid)
  end
  if not n then
    redis.call('DEL', dpkey(sid)) -- unpack takes a few thousand at most
  elseif #mids > 0 then
    redis.call('ZREM', dpkey(sid), unpack(mids))
  end
  return #mids
end

-- drop_sub removes a subscription with its pending deliveries.
local function drop_sub(sid)
  local sub = redis.call('HGET', skey(sid), 's')
  if sub and redis.call('HGET', SN, sub) == sid then redis.call('HDEL', SN, sub) end
  redis.call('DEL', skey(sid))
  redis.call('ZREM', SX, sid)
  redis.call('ZREM', SD, sid)
  redis.call('ZREM', SI, sid)
  drop_pending(sid)
  redis.call('HDEL', DS, 'd:' .. sid, 'f:' .. sid, 'e:' .. sid, 't:' .. sid)
end

-- sweep_subs drops subscriptions whose ttl ran out, and at most BUDGET of
-- their pending deliveries per call: a lapsed subscription with a long
-- backlog (its subscriber down for hours) is dropped once a few calls have
-- drained it, not inside one post. Reads skip it meanwhile.
local function sweep_subs(now)
  local dead = redis.call('ZRANGEBYSCORE', SX, '-inf', now, 'LIMIT', 0, BUDGET)
  local budget = BUDGET
  for _, sid in ipairs(dead) do
    budget = budget - drop_pending(sid, budget)
    if redis.call('EXISTS', dpkey(sid)) == 1 then return end
    drop_sub(sid)
    if budget == 0 then return end
  end
end

-- drop_all_subs removes every subscription, delivery and counter of the queue.
local function drop_all_subs()
  local ids = redis.call('ZRANGE', SI, 0, -1)
  for _, sid in ipairs(ids) do drop_sub(sid) end
  redis.call('DEL', SX, SD, SI, SN, DA, DS)
end

-- record_deliveries notes a delivery of message mid to every deliverable
-- live subscription in subs; called by post inside the same script.
local function record_deliveries(subs, now, mid, ttl, body, e)
  local nk = nkey(mid)
  redis.call('HSET', nk, 'b', body, 't', ttl, 'c', now, 'e', e, 'r', #subs)
  redis.call('PEXPIRE', nk, ttl)
  for _, sid in ipairs(subs) do
    redis.call('ZADD', dpkey(sid), e, mid)
    redis.call('ZADD', DUE, now, duemember(mid, sid))
  end
end

-- Moving a queue (docs/pooling.md, "Moving a queue"). In the queue hash:
-- g = the target the queue is sealed to, gs/ge/gm = what the seal saw
-- (sequence, exists, metadata), t = "1" once a batch was taken, z = end
-- of the tombstone Finish leaves (the hash then holds only g and z). Under
-- the scope: the batch in transit is its message hashes renamed to
-- :t:<id> and its claims written to :tc:<id> (out of every index, so no
-- other script finds them), listed in :ti (zset id -> seq) and :tc (zset
-- claim id -> 0); :mv holds the ids settled; on a target :im the ids
-- imported. Errors go back as replies the Go side maps to kinds
-- (errors.go).
local function tkey(id) return P .. ':t:' .. id end
local function tckey(id) return P .. ':tc:' .. id end
local function moved_reply(target) return redis.error_reply('SLUICEMOVED ' .. target) end
local function moving_reply() return redis.error_reply('SLUICEMOVING queue is moving') end
local function conflict_reply(why) return redis.error_reply('SLUICECONFLICT ' .. why) end

-- move_state returns the target the queue is sealed to (nil: none) and the
-- answer to give at once when the queue left (a live tombstone). A lapsed
-- tombstone reads as no move at all.
local function move_state(now)
  local f = redis.call('HMGET', Q, 'g', 'z', 'i', 'x', 'r')
  QREAD, INCREAD, INC, QX, XR = true, true, f[3], tonumber(f[4] or '0'), tonumber(f[5] or '0')
  if f[2] then
    if tonumber(f[2]) > now then return f[1], moved_reply(f[1]) end
    redis.call('DEL', Q, X, XE, K) -- a tombstone holds nothing else
    INC, QX, XR = nil, 0, 0
    return nil, nil
  end
  return f[1], nil
end

-- whereabouts answers for a message or claim id this sealed queue does not
-- hold: Moving while in transit, Moved once settled, nil otherwise. The
-- second result tells Moving (true) from Moved.
local function whereabouts(id, target)
  if not target then return nil, false end
  if redis.call('ZSCORE', TI, id) or redis.call('ZSCORE', TC, id) then return moving_reply(), true end
  if redis.call('SISMEMBER', MV, id) == 1 then return moved_reply(target), false end
  return nil, false
end

-- busy is what claims and pops check first: the tombstone's answer, if
-- any, and whether a batch is in transit. While one is, a claim or pop that
-- finds no free message here answers Moving (the caller would go on to the
-- target, past the batch); one that finds some takes them, as everything
-- left here sorts before the batch.
local function busy(now)
  local target, answer = move_state(now)
  if answer then return answer, false end
  return nil, target ~= nil and redis.call('EXISTS', TI, TC) > 0
end

-- delete_all deletes the per-id keys (keyof(id)) of every member of zkey.
local function delete_all(zkey, keyof)
  local ids = redis.call('ZRANGE', zkey, 0, -1)
  for i = 1, #ids, 500 do
    local batch = {}
    for j = i, math.min(i + 499, #ids) do batch[#batch + 1] = keyof(ids[j]) end
    redis.call('DEL', unpack(batch))
  end
end

-- push appends its arguments to the array t.
local function push(t, ...)
  for _, v in ipairs({...}) do t[#t + 1] = v end
end

-- transit_reply reads the batch in transit back from its records, in the
-- form mig_take.lua replies: {message count, claim count, then per
-- message id, body, created, expires, delay, client, claim id, claim
-- expiry, claim count, seq (newest first), then per claim id, ttl, grace,
-- created, expires}.
local function transit_reply()
  local out = {0, 0}
  local ids = redis.call('ZRANGE', TI, 0, -1)
  for i = #ids, 1, -1 do
    local id = ids[i]
    local h = redis.call('HMGET', tkey(id), 'b', 'c', 'e', 'd', 'u', 'k', 'x', 'n', 's')
    if h[1] then
      push(out, id, h[1], h[2], h[3], h[4] or '0', h[5] or '', h[6] or '', h[7] or '0', h[8] or '0', h[9] or '0')
      out[1] = out[1] + 1
    end
  end
  for _, cid in ipairs(redis.call('ZRANGE', TC, 0, -1)) do
    local c = redis.call('HMGET', tckey(cid), 't', 'g', 'c', 'e')
    if c[4] then
      push(out, cid, c[1] or '0', c[2] or '0', c[3] or '0', c[4])
      out[2] = out[2] + 1
    end
  end
  return out
end

-- zchunks calls redis.call(cmd, key, ...) over list in chunks that fit
-- Lua's argument limit.
local function zchunks(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end
