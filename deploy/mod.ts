/**
 * deploy: see README.md. Nothing is exported yet.
 * @module
 */
export {};
