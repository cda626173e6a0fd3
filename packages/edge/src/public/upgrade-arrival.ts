import type { Duplex } from 'node:stream';
import type { MuxStream } from '@tunnel2/protocol';
import type { TunnelEntry } from '../agents/tunnel-entry.js';
import { rejectUpgrade, sendRefusal } from '../answers/error-response.js';
import type { Refusal } from '../answers/refusals.js';
import type { PublicResponse } from '../exchange/public-message.js';
import { StreamUpgradeTunnel } from '../exchange/stream-upgrade-tunnel.js';
import { UpgradeTunnel, type UpgradeTunnelContext } from '../exchange/upgrade-tunnel.js';
import type { CrossNodeForwarder, OwnerEntry } from './cross-node.js';
import type { PublicRequest } from './public-request.js';
import type { Arrival, TunnelIngressOptions } from './session-routing.js';

/** The client's side of an upgrade as routing watches it: an HTTP/1.1 socket or an HTTP/2 response. */
type UpgradeClient = Pick<Duplex | PublicResponse, 'destroyed' | 'once' | 'off'>;

/**
 * What the two upgrade arrivals share: checked, routed and admitted as an upgrade (`upgrade`: the
 * backend's head asks for one), never retried on another replica, gone when their client closes, and
 * counted in flight from their start until their tunnel finishes. How they are refused, forwarded and
 * carried is the transport's.
 */
abstract class UpgradeArrivalBase implements Arrival {
  readonly request: PublicRequest;
  readonly upgrade = true;
  via: TunnelEntry | undefined = undefined;
  readonly avoid = undefined;
  protected readonly options: TunnelIngressOptions;
  readonly #client: UpgradeClient;

  constructor(request: PublicRequest, client: UpgradeClient, options: TunnelIngressOptions) {
    this.request = request;
    this.#client = client;
    this.options = options;
  }

  abstract forward(owner: OwnerEntry, crossNode: CrossNodeForwarder): void;
  abstract refuse(refusal: Refusal): void;
  abstract start(stream: MuxStream, payload: Buffer): void;

  get gone(): boolean {
    return this.#client.destroyed;
  }

  watch(onGone: () => void): () => void {
    const client = this.#client;
    client.once('close', onGone);
    return () => client.off('close', onGone);
  }

  /** The tunnel's context: in flight from now until it finishes. */
  protected tunnelContext(): UpgradeTunnelContext {
    const inFlight = this.options.inFlight;
    inFlight.start();
    return {
      name: this.request.route.name,
      responseTimeoutMs: this.options.responseTimeoutMs,
      onFinish: () => inFlight.finish(),
    };
  }
}

/** A public WebSocket upgrade as an arrival: refused with a raw answer on its socket, or piped once started. */
export class UpgradeArrival extends UpgradeArrivalBase {
  readonly #socket: Duplex;
  readonly #head: Buffer;

  constructor(request: PublicRequest, socket: Duplex, head: Buffer, options: TunnelIngressOptions) {
    super(request, socket, options);
    this.#socket = socket;
    this.#head = head;
  }

  forward(owner: OwnerEntry, crossNode: CrossNodeForwarder): void {
    crossNode.forwardUpgrade(this.request, this.#socket, this.#head, owner);
  }

  refuse(refusal: Refusal): void {
    rejectUpgrade(this.#socket, refusal);
  }

  start(stream: MuxStream, payload: Buffer): void {
    const tunnel = new UpgradeTunnel(this.#socket, stream, this.tunnelContext());
    stream.sendHeaders(payload, false);
    tunnel.pumpClientBytes(this.#head);
  }
}

/** An RFC 8441 WebSocket as an arrival: refused with an HTTP/2 response, or carried once started. */
export class StreamUpgradeArrival extends UpgradeArrivalBase {
  readonly #res: PublicResponse;

  constructor(request: PublicRequest, res: PublicResponse, options: TunnelIngressOptions) {
    super(request, res, options);
    this.#res = res;
  }

  forward(owner: OwnerEntry, crossNode: CrossNodeForwarder): void {
    crossNode.forwardStreamUpgrade(this.request, this.#res, owner);
  }

  refuse(refusal: Refusal): void {
    sendRefusal(this.#res, refusal);
  }

  start(stream: MuxStream, payload: Buffer): void {
    // The client's bytes follow the backend's 101 (StreamUpgradeTunnel).
    new StreamUpgradeTunnel(this.request.req, this.#res, stream, this.tunnelContext());
    stream.sendHeaders(payload, false);
  }
}
