-- Writes the checkpoint examples/embed_c/infer.c runs: a small MLP (Linear(4, 8), ReLU,
-- Linear(8, 3)) with seeded weights, as safetensors with the module's names ("0.weight",
-- "0.bias", "2.weight", "2.bias").
--   bin/lantern examples/embed_c/make_model.lua OUT.safetensors [SEED]
local lt = require "lantern"
local nn = lt.nn

local out = arg[1] or error("usage: make_model.lua OUT.safetensors [SEED]")
lt.manual_seed(tonumber(arg[2]) or 7)
local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
lt.safetensors.save(model:state_dict(), out)
print("wrote " .. out)
