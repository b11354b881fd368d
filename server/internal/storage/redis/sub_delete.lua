-- KEYS: scope. ARGV: id ("" : every subscription of the queue).
if ARGV[1] == '' then
  drop_all_subs()
elseif redis.call('ZSCORE', SI, ARGV[1]) then
  drop_sub(ARGV[1])
end
return 1
