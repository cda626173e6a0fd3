// The agent imports undici's Pool from its own file: undici's index loads all of undici (fetch, WebSocket,
// cache, mock agents), about 5 MB of heap and 13 MB of RSS an agent never uses. undici types only its index.
declare module 'undici/lib/dispatcher/pool.js' {
  import { Pool } from 'undici';

  export default Pool;
}
