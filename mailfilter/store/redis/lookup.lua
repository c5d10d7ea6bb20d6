-- Entry of the lookup script (after find.lua): the records, then the reply.
out[#out + 1] = #order
for _, id in ipairs(order) do out[#out + 1] = id; out[#out + 1] = docs[id] end
return out
