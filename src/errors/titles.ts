/** The HTTP titles of the catalogue's entries that several codes share. */
export const BAD_REQUEST = "Bad Request";
export const NOT_FOUND = "Not Found";
export const CONFLICT = "Conflicting Resource";
export const PRECONDITION = "Precondition Failed";
export const UNPROCESSABLE = "Unprocessable Entity";
export const TOO_MANY = "Too Many Requests";
export const INTERNAL = "Internal Server Error";
