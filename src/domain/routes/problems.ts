/** A problem found while compiling a route or a policy: the field (`policies[2].match[0]`) and what is wrong with it. */
export interface Problem {
  at: string;
  message: string;
}

/** Problems found while compiling, in the order found. */
export type Problems = Problem[];
