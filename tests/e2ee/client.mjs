// A real end-to-end encrypted Matrix client for the tests: matrix-js-sdk with its Rust
// crypto (compiled to WASM, the crypto of Element Web), in memory, one per person and
// device. The Rust tests drive it over stdin/stdout: one JSON command per line in, one
// JSON answer per line out (prefixed, so nothing the SDK prints is taken for an answer).
// Everything the SDK logs goes to stderr.
//
//   {"id": 1, "cmd": "login", "hs": "http://127.0.0.1:8008", "user": "alice", "password": "..."}
//   -> @@richbot {"id": 1, "ok": true, "user_id": "@alice:localhost", "device_id": "ABC"}
//
// Commands: login, isolation, create_room, join, state, to_device, redact, send, seal, send_sealed, send_file,
// request_verification, wait_joined, wait_messages, messages, device_status, stop. Failures answer {"ok": false, "error"}.

for (const level of ["log", "info", "debug", "warn", "error", "trace"]) {
  console[level] = (...args) => process.stderr.write(args.map(String).join(" ") + "\n");
}

const sdk = await import("matrix-js-sdk");
const { logger } = await import("matrix-js-sdk/lib/logger.js");
const { OnlySignedDevicesIsolationMode, AllDevicesIsolationMode } = await import(
  "matrix-js-sdk/lib/crypto-api/index.js"
);
logger.setLevel?.("warn");

const PREFIX = "@@richbot ";
let client = null;
let userId = null;

function answer(value) {
  process.stdout.write(PREFIX + JSON.stringify(value) + "\n");
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Polls `f` every 100 ms until it returns something other than undefined, or throws
/// after `timeoutMs`.
async function until(what, timeoutMs, f) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/// What the tests see of a timeline event: its clear type and content once decrypted.
function view(ev) {
  return {
    event_id: ev.getId(),
    sender: ev.getSender(),
    type: ev.getType(),
    wire_type: ev.getWireType(),
    encrypted: ev.isEncrypted(),
    decryption_failure: ev.isDecryptionFailure() ? String(ev.decryptionFailureReason ?? "failed") : null,
    content: ev.getOriginalContent(),
    wire_content: ev.getWireContent(),
    relates_to: ev.getWireContent()?.["m.relates_to"] ?? ev.getOriginalContent()?.["m.relates_to"] ?? null,
  };
}

function timeline(roomId) {
  const room = client.getRoom(roomId);
  if (!room) return [];
  return room.getLiveTimeline().getEvents().map(view);
}

const commands = {
  async login({ hs, user, password }) {
    const bare = sdk.createClient({ baseUrl: hs });
    const login = await bare.loginRequest({
      type: "m.login.password",
      identifier: { type: "m.id.user", user },
      password,
    });
    userId = login.user_id;
    client = sdk.createClient({
      baseUrl: hs,
      userId: login.user_id,
      accessToken: login.access_token,
      deviceId: login.device_id,
    });
    await client.initRustCrypto({ useIndexedDB: false });
    await client.getCrypto().bootstrapCrossSigning({
      authUploadDeviceSigningKeys: async (makeRequest) => {
        await makeRequest({ type: "m.login.password", identifier: { type: "m.id.user", user }, password });
      },
    });
    const synced = new Promise((resolve) => {
      const on = (state) => {
        if (state === "PREPARED" || state === "SYNCING") {
          client.off(sdk.ClientEvent.Sync, on);
          resolve();
        }
      };
      client.on(sdk.ClientEvent.Sync, on);
    });
    // Invites are joined as they come (a person who asked the bot into a room).
    client.on(sdk.RoomMemberEvent.Membership, (_event, member) => {
      if (member.userId === userId && member.membership === "invite") {
        client.joinRoom(member.roomId).catch((e) => console.error("join failed", e));
      }
    });
    await client.startClient({ initialSyncLimit: 20 });
    await synced;
    return {
      user_id: login.user_id,
      device_id: login.device_id,
      cross_signed: await client.getCrypto().isCrossSigningReady(),
    };
  },

  async isolation({ mode }) {
    const isolation = mode === "only_signed" ? new OnlySignedDevicesIsolationMode() : new AllDevicesIsolationMode(false);
    client.getCrypto().setDeviceIsolationMode(isolation);
    return {};
  },

  async create_room({ invite = [], encrypted = true, direct = false, name }) {
    const initial_state = encrypted
      ? [{ type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } }]
      : [];
    const body = { invite, is_direct: direct, preset: direct ? "trusted_private_chat" : "private_chat", initial_state };
    if (name) body.name = name;
    const { room_id } = await client.createRoom(body);
    await until(`${room_id} in the client`, 60000, () => (client.getRoom(room_id) ? true : undefined));
    return { room_id };
  },

  async join({ room }) {
    await until(`the invite to ${room}`, 60000, () => (client.getRoom(room) ? true : undefined));
    if (client.getRoom(room).getMyMembership() !== "join") await client.joinRoom(room);
    await until(`joined ${room}`, 60000, () => (client.getRoom(room)?.getMyMembership() === "join" ? true : undefined));
    return {};
  },

  async state({ room, type, content, state_key = "" }) {
    const { event_id } = await client.sendStateEvent(room, type, content, state_key);
    return { event_id };
  },

  /// Sends a to-device message in the clear (as anyone may, to any device):
  /// `messages` is {user: {device: content}}.
  async to_device({ type, messages }) {
    const map = new Map(Object.entries(messages).map(([user, devices]) => [user, new Map(Object.entries(devices))]));
    await client.sendToDevice(type, map);
    return {};
  },

  async redact({ room, event_id }) {
    await client.redactEvent(room, event_id);
    return {};
  },

  async send({ room, content, type = "m.room.message" }) {
    const { event_id } = await client.sendEvent(room, type, content);
    return { event_id };
  },

  /// Sends an event of any type sealed in an `m.room.encrypted` one, as a hostile client
  /// can: the SDK itself never encrypts a redaction (nor a reaction), so the event is
  /// encrypted by its crypto first and the result sent as it is.
  /// Encrypts an event for the room as this device would send it, and only answers its
  /// wire content (another sender may then paste it into an event of their own).
  async seal({ room, type, content }) {
    const event = new sdk.MatrixEvent({ type, content, room_id: room, sender: userId, event_id: `~sealed${Date.now()}` });
    await client.cryptoBackend.encryptEvent(event, client.getRoom(room));
    return { content: event.getWireContent() };
  },

  async send_sealed({ room, type, content }) {
    const event = new sdk.MatrixEvent({ type, content, room_id: room, sender: userId, event_id: `~sealed${Date.now()}` });
    await client.cryptoBackend.encryptEvent(event, client.getRoom(room));
    const { event_id } = await client.sendEvent(room, "m.room.encrypted", event.getWireContent());
    return { event_id };
  },

  /// Sends a picture or file as Element does in an encrypted room: the bytes encrypted
  /// (AES-256-CTR, the attachment format of the spec), the ciphertext uploaded, and the
  /// key, IV and hash in the message's `file`, which is itself encrypted. `extra` adds to
  /// the content (and to its `info`).
  async send_file({ room, data, msgtype, body, name, mimetype, extra = {} }) {
    const { createCipheriv, createHash, randomBytes } = await import("node:crypto");
    const plain = Buffer.from(data, "base64");
    const key = randomBytes(32);
    const iv = Buffer.concat([randomBytes(8), Buffer.alloc(8)]);
    const cipher = createCipheriv("aes-256-ctr", key, iv);
    const sealed = Buffer.concat([cipher.update(plain), cipher.final()]);
    const unpadded = (b) => b.toString("base64").replace(/=+$/, "");
    const { content_uri } = await client.uploadContent(sealed, { type: "application/octet-stream", includeFilename: false });
    const file = {
      v: "v2",
      url: content_uri,
      key: { kty: "oct", key_ops: ["encrypt", "decrypt"], alg: "A256CTR", k: key.toString("base64url"), ext: true },
      iv: unpadded(iv),
      hashes: { sha256: unpadded(createHash("sha256").update(sealed).digest()) },
    };
    const content = { msgtype, body, filename: name, file, info: { mimetype, size: plain.length } };
    // What a voice message adds (its length, the voice marker), as Element sends it.
    Object.assign(content.info, extra.info ?? {});
    for (const [key, value] of Object.entries(extra)) if (key !== "info") content[key] = value;
    const { event_id } = await client.sendEvent(room, "m.room.message", content);
    return { event_id, url: content_uri };
  },

  async wait_joined({ room, user, timeout_ms = 60000 }) {
    await until(`${user} joins ${room}`, timeout_ms, () =>
      client.getRoom(room)?.getMember(user)?.membership === "join" ? true : undefined,
    );
    return {};
  },

  /// Waits until `sender` has `count` messages (of `type`) in `room` that are decrypted,
  /// and returns all of the room's events. A message whose room key is still on its way is
  /// a decryption failure for a moment (the key comes by to-device, which a loaded machine
  /// may deliver a sync later): it counts once it decrypts. The SDK gives a failure the
  /// type `m.room.message` (an `m.bad.encrypted` body), so the type alone does not tell:
  /// counted, a failure ended the wait before the message decrypted. On time-out, the
  /// error lists what `sender` has so far.
  async wait_messages({ room, sender, count, timeout_ms = 60000, type = "m.room.message" }) {
    const counts = (e) => e.sender === sender && e.type === type && e.decryption_failure === null;
    try {
      const events = await until(`${count} message(s) from ${sender}`, timeout_ms, () => {
        const all = timeline(room);
        return all.filter(counts).length >= count ? all : undefined;
      });
      return { events };
    } catch (e) {
      const seen = timeline(room).filter((e) => e.sender === sender);
      throw new Error(`${e.message}; from ${sender} so far: ${JSON.stringify(seen)}`);
    }
  },

  async messages({ room }) {
    return { events: timeline(room) };
  },

  /// Asks `user` to verify, in the DM `room` (as Element does for another user), or
  /// `device` of theirs to-device when it is given, and waits for the request to end: its
  /// phase (5 cancelled), code and who cancelled it.
  async request_verification({ user, room, device, timeout_ms = 60000 }) {
    const crypto = client.getCrypto();
    const request = device
      ? await crypto.requestDeviceVerification(user, device)
      : await crypto.requestVerificationDM(user, room);
    await until("the verification request to end", timeout_ms, () => (request.phase >= 5 ? true : undefined));
    return { phase: request.phase, code: request.cancellationCode ?? null, by: request.cancellingUserId ?? null };
  },

  async device_status({ user, device }) {
    const crypto = client.getCrypto();
    const devices = await crypto.getUserDeviceInfo([user], true);
    const ids = [...(devices.get(user)?.keys() ?? [])];
    const target = device ?? ids[0];
    const status = target ? await crypto.getDeviceVerificationStatus(user, target) : null;
    return {
      devices: ids,
      device: target ?? null,
      signed_by_owner: status?.signedByOwner ?? false,
      cross_signing_verified: status?.crossSigningVerified ?? false,
    };
  },

  async stop() {
    client?.stopClient();
    setTimeout(() => process.exit(0), 10);
    return {};
  },
};

let queue = Promise.resolve();
let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let at;
  while ((at = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, at);
    buffer = buffer.slice(at + 1);
    if (!line.trim()) continue;
    // One command at a time, in order.
    queue = queue.then(async () => {
      let request;
      try {
        request = JSON.parse(line);
        const run = commands[request.cmd];
        if (!run) throw new Error(`unknown command ${request.cmd}`);
        answer({ id: request.id, ok: true, ...(await run(request)) });
      } catch (e) {
        answer({ id: request?.id ?? null, ok: false, error: String(e?.stack ?? e) });
      }
    });
  }
});
process.stdin.on("end", () => {
  client?.stopClient();
  process.exit(0);
});
