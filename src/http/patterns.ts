/**
 * Regular expressions used as schema `pattern`s, each declared with what it asks for in words. Validation
 * messages (a /v2 400's `errors[]`, a configuration problem) quote the words, `must contain only letters, digits
 * and _`, never the expression: a user should not have to read a regular expression to fix a value.
 */
const WORDS = new Map<string, string>();

/**
 * Declares `pattern` with `words`, the rest of the sentence "must …", and returns `pattern` for a schema. Declaring
 * one expression twice with other words is a programming error, so one expression always reads the same.
 */
export function describedPattern(pattern: string, words: string): string {
  const known = WORDS.get(pattern);
  if (known !== undefined && known !== words) throw new Error(`pattern ${pattern} is declared as '${known}' and as '${words}'`);
  WORDS.set(pattern, words);
  return pattern;
}

/** The words declared for `pattern`, or undefined for an undeclared one. */
export function patternWords(pattern: string): string | undefined {
  return WORDS.get(pattern);
}
