/** Serialises async sections within this process; cross-process safety comes from version checks. */
import { Slots } from "./slots.ts";

/** One section at a time, in the order asked (Slots of one). */
export class Mutex extends Slots {
  constructor() {
    super(1);
  }
}
