-- Lua shared by every script that reads or writes a credit balance (keys.keyCredits, keys.identityCredits: JSON
-- {remaining, refill?: {interval, amount, refillDay?}, lastRefillAt, lowThreshold?}): the refill arithmetic of lib/credit-refill.ts, mirrored (keep
-- them in step), the balance's encoding, and the decision time. Defines DAY, whole, encodeBalance, refilled and
-- timeFrom.
local DAY = 86400000

-- Calendar arithmetic on days since 1970-01-01 (proleptic Gregorian), for monthly refills.
local function civilFromDays(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400
  if month <= 2 then year = year + 1 end
  return year, month, day
end

local function daysFromCivil(year, month, day)
  if month <= 2 then year = year - 1 end
  local era = math.floor(year / 400)
  local yoe = year - era * 400
  local mp = month > 2 and month - 3 or month + 9
  local doy = math.floor((153 * mp + 2) / 5) + day - 1
  return era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
end

local function daysInMonth(year, month)
  if month == 2 then
    if (year % 4 == 0 and year % 100 ~= 0) or year % 400 == 0 then return 29 end
    return 28
  end
  if month == 4 or month == 6 or month == 9 or month == 11 then return 30 end
  return 31
end

-- The latest scheduled refill at or before 'at' (see lastScheduledRefill in lib/credit-refill.ts).
local function lastScheduledRefill(refill, at)
  if refill.interval == "daily" then return math.floor(at / DAY) * DAY end
  local refillDay = refill.refillDay or 1
  local year, month = civilFromDays(math.floor(at / DAY))
  local this = daysFromCivil(year, month, math.min(refillDay, daysInMonth(year, month))) * DAY
  if this <= at then return this end
  if month == 1 then year, month = year - 1, 12 else month = month - 1 end
  return daysFromCivil(year, month, math.min(refillDay, daysInMonth(year, month))) * DAY
end

-- A whole number written in full: Lua's own conversion (and cjson's) keeps 14 significant digits, exact below 10^14.
local function whole(value) return string.format("%.0f", value) end

-- JSON of a balance in the stores' shape; integers are written in full. The low threshold is kept as it was:
-- scripts move the balance, never its settings.
local function encodeBalance(remaining, refill, lastRefillAt, lowThreshold)
  local json = '{"remaining":' .. whole(remaining)
  if refill then
    json = json .. ',"refill":{"interval":' .. cjson.encode(refill.interval) .. ',"amount":' .. whole(refill.amount)
    if refill.refillDay then json = json .. ',"refillDay":' .. whole(refill.refillDay) end
    json = json .. '}'
  end
  json = json .. ',"lastRefillAt":' .. whole(lastRefillAt)
  if lowThreshold then json = json .. ',"lowThreshold":' .. whole(lowThreshold) end
  return json .. '}'
end

-- A decoded balance's remaining and lastRefillAt with every refill due at 'now' applied (withRefills): a refill
-- raises the balance to its amount (it never lowers it), and several missed refills are one.
local function refilled(balance, now)
  local remaining, lastRefillAt = balance.remaining, balance.lastRefillAt
  if balance.refill then
    local due = lastScheduledRefill(balance.refill, now)
    if due > lastRefillAt then
      if remaining < balance.refill.amount then remaining = balance.refill.amount end
      lastRefillAt = due
    end
  end
  return remaining, lastRefillAt
end

-- The decision time from an argument: unix ms, or "" for the Redis server's TIME (one clock for every instance).
local function timeFrom(argument)
  if argument ~= "" then return tonumber(argument) end
  local time = redis.call("TIME")
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
