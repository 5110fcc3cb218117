/**
 * Functions an analytics query may call, by the name ClickHouse's parser gives them (compared case-insensitively,
 * as ClickHouse resolves case variants of a name to the same function or to none). The public list is reference §8's
 * allow-list; the operators are what the parser turns SQL syntax into (`a = b` is `equals`, `CASE` is `multiIf`, …);
 * the `-Merge` functions read the latency states of the aggregate tables. Table functions are never allowed.
 */
export const ALLOWED_FUNCTIONS: readonly string[] = [
  // aggregates
  "count", "countDistinct", "sum", "avg", "min", "max", "any", "groupArray", "groupUniqArray", "uniq", "uniqExact", "quantile",
  // reading the aggregate tables' latency states
  "avgMerge", "quantileTDigestMerge",
  // date and time
  "now", "now64", "today", "toDate", "toDateTime", "toDateTime64",
  "toStartOfDay", "toStartOfWeek", "toStartOfMonth", "toStartOfQuarter", "toStartOfYear", "toStartOfHour", "toStartOfMinute",
  "date_trunc", "formatDateTime", "fromUnixTimestamp64Milli", "toUnixTimestamp64Milli",
  "toIntervalDay", "toIntervalWeek", "toIntervalMonth", "toIntervalYear", "toIntervalHour", "toIntervalMinute", "toIntervalSecond",
  "toIntervalMillisecond", "toIntervalMicrosecond", "toIntervalNanosecond", "toIntervalQuarter",
  // strings
  "lower", "upper", "substring", "concat", "length", "trim", "trimBoth", "trimLeft", "trimRight", "startsWith", "endsWith",
  // maths
  "round", "floor", "ceil", "abs",
  // conditionals
  "if", "sumIf", "countIf", "coalesce", "multiIf", "caseWithExpression",
  // conversions
  "toString", "toInt32", "toInt64", "toFloat64", "CAST",
  // arrays
  "has", "hasAny", "hasAll", "arrayJoin", "arrayFilter",
  // operators written as SQL syntax
  "and", "or", "not", "equals", "notEquals", "less", "greater", "lessOrEquals", "greaterOrEquals",
  "plus", "minus", "multiply", "divide", "intDiv", "modulo", "negate",
  "in", "notIn", "like", "notLike", "ilike", "notILike", "isNull", "isNotNull",
  "tuple", "array", "tupleElement", "arrayElement", "lambda", "exists",
];

const ALLOWED = new Set(ALLOWED_FUNCTIONS.map((name) => name.toLowerCase()));

export function isAllowedFunction(name: string): boolean {
  return ALLOWED.has(name.toLowerCase());
}
