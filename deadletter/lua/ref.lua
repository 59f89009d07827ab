-- ref(v) decodes a value of the refs hash (Go's refString:
-- "<len(agent)>:<agent><class>"): it returns the entry's agent and class,
-- both '' for a missing value. Shared by put.lua and
-- delete.lua.
local function ref(v)
  if not v then return '', '' end
  local sep = string.find(v, ':', 1, true)
  local n = tonumber(string.sub(v, 1, sep - 1))
  return string.sub(v, sep + 1, sep + n), string.sub(v, sep + n + 1)
end
