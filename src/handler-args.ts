/**
 * What handler.command's literal arguments look like, shared by the config checks
 * (config/program.ts) and the scan's list of the handler's own files (runner/own-files.ts).
 */

/** A placeholder cronsafe fills per attempt: such an argument names no file of the handler's. */
export const PLACEHOLDER = /\{(path|id|output|attempt)\}/;

/** What a script's name ends with: an option's value with a `/` (`node -r dotenv/config`) does not. */
export const SCRIPT_NAME = /\.(py|pyc|js|mjs|cjs|ts|mts|cts|rb|pl|pm|php|r|lua|sh|bash|zsh|ksh)$/i;
