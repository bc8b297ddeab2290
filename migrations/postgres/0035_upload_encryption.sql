-- An upload made for an encrypted room is stored on the media repository encrypted, as
-- Element encrypts attachments (AES-256-CTR, its key in the encrypted event). Its key,
-- IV and hash are kept here before the bytes go, so a fill retried after a crash sends
-- the same ciphertext, and the message that shows the upload can carry the key.
ALTER TABLE uploads ADD COLUMN encryption TEXT;
