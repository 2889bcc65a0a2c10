"""Issue 15 item 6: the secret forms masking used to miss, each with the text around it kept."""

from __future__ import annotations

import pytest

from qita_board.secrets import find_secrets, is_secret_key, mask_at, mask_data, mask_text

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
STS_TOKEN = "FwoGZXIvYXdzEBYaDH0123456789abcdefSESSION"


@pytest.mark.parametrize("raw,expected", [
    ("DB_PASSWORD=hunter22", "DB_PASSWORD=[secret masked: password]"),
    ("export POSTGRES_PASSWORD=s3cr3t-pw;", "export POSTGRES_PASSWORD=[secret masked: password];"),
    ("GITHUB_TOKEN=abcdef123456", "GITHUB_TOKEN=[secret masked: secret]"),
    ("OPENAI_API_KEY: 'abc123xyz789'", "OPENAI_API_KEY: '[secret masked: secret]'"),
    ("run --password x --verbose", "run --password [secret masked: password] --verbose"),
    ("run --api-key=k3y-v4lue", "run --api-key=[secret masked: secret]"),
    ("postgresql://user:pw@db:5432/app", "postgresql://user:[secret masked: url-password]@db:5432/app"),
    ("see https://bob:Tr0ub4dor@example.org/x", "see https://bob:[secret masked: url-password]@example.org/x"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [secret masked: basic-auth …ZA==]"),
    ('{"SecretAccessKey": "' + AWS_SECRET + '"}', '{"SecretAccessKey": "[secret masked: aws-secret-key …EKEY]"}'),
    ('"SessionToken": "' + STS_TOKEN + '"', '"SessionToken": "[secret masked: secret …SION]"'),
    ("Set-Cookie: sid=abc123; Path=/; HttpOnly", "Set-Cookie: [secret masked: secret …Only]"),
    ("PRIVATE-TOKEN: glpat-abcdefghij", "PRIVATE-TOKEN: [secret masked: secret …ghij]"),
    ("dbPassword = 'hunter22'", "dbPassword = '[secret masked: password]'"),
    # the same everyday names as real assignments still are
    ("pass=hunter22", "pass=[secret masked: password]"),
    ('{"pass": "hunter22"}', '{"pass": "[secret masked: password]"}'),
    ("{'pass': 'hunter22'}", "{'pass': '[secret masked: password]'}"),
])
def test_missing_forms_are_masked(raw, expected):
    assert mask_text(raw) == expected


@pytest.mark.parametrize("harmless", [
    "max_tokens=4096", "input_tokens: 1200", "--max-tokens 100", "--token-file ./t.txt", "http://host:8080/path",
    "Basic usage: run it twice", "password_hint=the dog", "eos_token=</s>", "tokenizer=gpt2", "PWD_STYLE=ok",
    # everyday words that are also secret key names, in prose
    "premature pass: c_note failed in e2e", "tests pass: 3 of 3", "auth: required", "pin: the left one",
    # a quoted phrase ending in one of them (coder_eval's grading log names its criteria so)
    "for criterion 'unit tests pass': python3 -m unittest", 'step "needs auth": login first',
])
def test_look_alikes_are_left_alone(harmless):
    assert mask_text(harmless) == harmless


@pytest.mark.parametrize("key", ["DB_PASSWORD", "OPENAI_API_KEY", "GITHUB_TOKEN", "Set-Cookie", "PRIVATE-TOKEN",
                                 "SecretAccessKey", "SessionToken", "x-api-key", "client_secret", "dbPassword",
                                 "Authorization", "Cookie", "credentials"])
def test_secret_keys(key):
    assert is_secret_key(key)
    assert mask_data({key: "plain-looking-value"})[key].startswith("[secret masked: ")


@pytest.mark.parametrize("key", ["tokens", "max_tokens", "input_tokens", "token_count", "keyboard", "passage",
                                 "eos_token", "secret_santa", "author"])
def test_ordinary_keys(key):
    assert not is_secret_key(key)
    assert mask_data({key: "plain-looking-value"})[key] == "plain-looking-value"


def test_everything_under_a_secret_key_is_masked_lists_dicts_and_numeric_passwords():
    data = {"credentials": {"user": "bob", "list": ["a-value", "b-value"]},
            "state_diff": {"password": {"before": "old-pass", "after": "new-pass"}},
            "login": {"pin": 123456, "password": 987654321, "retries": 3}}
    out = mask_data(data)
    flat = repr(out)
    for raw in ("bob", "a-value", "b-value", "old-pass", "new-pass", "123456", "987654321"):
        assert raw not in flat, raw
    assert out["login"]["retries"] == 3


@pytest.mark.parametrize("path,value", [
    (["run", "meta", "password"], "hunter22"),
    (["decision", "actions", "0", "args", "password"], "hunter22"),
    (["payload", "token"], "abcdef"),
    (["env", "GITHUB_TOKEN"], "x"),
    (["state_diff", "api_key", "after"], "new-key"),
])
def test_a_value_fetched_on_its_own_is_masked_by_its_key_path(path, value):
    out = mask_at(value, path)
    assert out.startswith("[secret masked: ") and value not in out
    assert mask_at({"inner": value}, path)["inner"].startswith("[secret masked: ")


def test_a_value_on_an_ordinary_path_is_masked_by_its_shape_only():
    assert mask_at("plain text", ["observation"]) == "plain text"
    assert mask_at("key AKIAIOSFODNN7EXAMPLE", ["observation"]) == "key [secret masked: aws-access-key …MPLE]"


def test_find_secrets_names_kind_and_value():
    assert find_secrets("DB_PASSWORD=hunter22 and postgresql://u:pw@h/d") == [("url-password", "pw"),
                                                                             ("password", "hunter22")]


# -- forms an attacker's review found unmasked ------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    # an assignment behind a word that is not a secret's name (its value held the assignment)
    ("crash: AWS_SECRET_ACCESS_KEY=" + AWS_SECRET, "crash: AWS_SECRET_ACCESS_KEY=[secret masked: aws-secret-key …EKEY]"),
    ("error: DB_PASSWORD=hunter22", "error: DB_PASSWORD=[secret masked: password]"),
    ("Error: token=abcdefghij", "Error: token=[secret masked: secret]"),
    ("note: password=hunter22", "note: password=[secret masked: password]"),
    ("GET https://api.example.com/v1?api_key=abcdef123456", "GET https://api.example.com/v1?api_key=[secret masked: secret]"),
    ("fetch https://x.io/a?access_token=zzzzzzzz&x=1", "fetch https://x.io/a?access_token=[secret masked: secret]&x=1"),
    ("npm: //registry.npmjs.org/:_authToken=abcdef123456", "npm: //registry.npmjs.org/:_authToken=[secret masked: secret]"),
    # command lines
    ("curl -u admin:hunter22 https://h", "curl -u admin:[secret masked: cli-user] https://h"),
    ("mysql -uroot -pS3cretPW db", "mysql -uroot -p[secret masked: cli-password] db"),
    ("sshpass -p 'hunter22' ssh h", "sshpass -p '[secret masked: cli-password]' ssh h"),
    # other spellings of an assignment, and values that run on
    ("'password' => 'hunter22'", "'password' => '[secret masked: password]'"),
    ('{\\"password\\": \\"hunter22\\"}', '{\\"password\\": \\"[secret masked: password]\\"}'),
    ("DB_PASSWORD=Tr0ub4dor&3 next", "DB_PASSWORD=[secret masked: password] next"),
    ("pw=abcdef", "pw=[secret masked: secret]"),
    ("API_KEY=LEAK8", "API_KEY=[secret masked: secret]"),
    ("AccountKey=abcdefghijklmnopqrstuvwx==;", "AccountKey=[secret masked: secret …wx==];"),
    # token shapes
    ("sk_live_abcdefghijklmnop1234", "[secret masked: stripe-key …1234]"),
    ("glpat-abcdefghijklmnopqrst12", "[secret masked: gitlab-token …st12]"),
    ("SG.abcdefghijklmnopqr.abcdefghijklmnopqrstu", "[secret masked: sendgrid-key …rstu]"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nabcdefghijklmnopqrstuvwxyz0123\n-----END PGP PRIVATE KEY BLOCK-----",
     "[secret masked: private-key]"),
    # a value that only looks like our placeholder is masked like any other
    ("password=[secret masked: hunter2]", "password=[secret masked: password] masked: hunter2]"),
])
def test_forms_found_by_review_are_masked(raw, expected):
    assert mask_text(raw) == expected


@pytest.mark.parametrize("harmless", ["mysql -p db", "mysql -u root -p", "the -p flag", "ls -u", "PATH=/usr/bin:/bin",
                                      "TOKEN_COUNT=5", "x: y: z", "tests pass: 3 of 3"])
def test_their_look_alikes_are_left_alone(harmless):
    assert mask_text(harmless) == harmless


@pytest.mark.parametrize("key", ["cookies", "session", "SESSION_KEY", "SECRET_KEY_BASE", "ENCRYPTION_KEY", "AccountKey",
                                 "password_confirmation", "passwordHash", "credentials_json", "private_key_pem",
                                 "client_secret_value", "auth_key", "jwt", "pw"])
def test_more_secret_key_names(key):
    assert is_secret_key(key) and mask_data({key: "plain"})[key].startswith("[secret masked: ")


def test_a_value_under_a_secret_key_is_masked_whole_whatever_it_holds():
    cookie = "_ga=GA1.2.LEAKga; session=LEAKsessioncookie88; auth=abcdefgh"
    assert mask_data({"headers": {"Cookie": cookie}}) == {"headers": {"Cookie": "[secret masked: secret …efgh]"}}
    assert mask_at("LEAKpassphrasepart sk-" + "a" * 30, ["passphrase"]).startswith("[secret masked: openai-key")
    # only one of our own placeholders is left as it is
    assert mask_data({"password": "[secret]LEAKplaceholder15"}) == {"password": "[secret masked: password …er15]"}
    assert mask_data({"password": "[secret masked: password]"}) == {"password": "[secret masked: password]"}


def test_a_key_name_spelled_with_other_unicode_letters_is_still_looked_at():
    kelvin = "TO\u212aEN"  # "TOKEN" with a Kelvin sign for the K: lower() makes it "token"
    assert is_secret_key(kelvin) and mask_data({kelvin: "plain-looking"}) == {kelvin: "[secret masked: secret]"}


def test_hostile_near_misses_of_the_nested_assignment_stay_linear():
    # each rejected `word:` looks into its value at most a few levels: long runs of
    # assignments cost a few passes, not one per assignment
    for text in ("a=" * 400_000, "x: " * 300_000 + "password=zzz", "a:" * 200_000):
        assert mask_text(text).startswith(text[:20])
