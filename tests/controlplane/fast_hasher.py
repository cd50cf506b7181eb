"""The production password hasher with a test's work factor.

Django's PBKDF2 hasher runs 1,000,000 rounds a password (~0.6-1.5 s of CPU here): an admin test
sets six (the fleet's four users, the signed-in admin, a second admin) and logs in, which made
such tests spend most of their time hashing. Same algorithm, fewer rounds: the hashes are still
`pbkdf2_sha256$...` and a process with the production settings (a subprocess server, the demo)
still verifies them (it reads the rounds from the hash, and re-hashes with its own on a login).
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1000
