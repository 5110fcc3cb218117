import { describedPattern } from "../http/patterns.js";

/** A section (or nested object) left out of the file is {}, which Ajv then fills with its fields' defaults. */
export const EMPTY = { default: {} };

export const HTTP_URL_PATTERN = describedPattern("^https?://", "be an http:// or https:// URL");
