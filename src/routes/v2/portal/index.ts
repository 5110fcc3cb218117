import createKey from "./create-key.js";
import createPortal from "./create-portal.js";
import createSession from "./create-session.js";
import deletePortal from "./delete-portal.js";
import exchangeCode from "./exchange-code.js";
import getPortal from "./get-portal.js";
import getVerifications from "./get-verifications.js";
import listKeys from "./list-keys.js";
import listPortals from "./list-portals.js";
import rerollKey from "./reroll-key.js";
import updatePortal from "./update-portal.js";

/** The operator's portal procedures, behind a root key like every other /v2 procedure. */
export const PORTAL_ROOT_PROCEDURES = [createPortal, getPortal, listPortals, updatePortal, deletePortal, createSession] as const;

/** Redeems a code: no root key, no session. */
export const PORTAL_EXCHANGE = exchangeCode;

/** The customer's procedures: a portal session, never a root key. */
export const PORTAL_SESSION_PROCEDURES = [listKeys, rerollKey, createKey, getVerifications] as const;
