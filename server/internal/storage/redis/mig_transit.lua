-- KEYS: scope. Read-only. Returns the batch in transit as transit_reply
-- (lib.lua) does; {0, 0} when none is.
return transit_reply()
