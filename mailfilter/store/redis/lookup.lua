-- The lookup script's end (after find.lua): the records, then the reply.
out[#out + 1] = #order
for _, id in ipairs(order) do out[#out + 1] = u40(id, 0); out[#out + 1] = docs[id] end
return out
