package sdk

// clientid.go builds and parses the WarpStream client ID
// ([<user id>,]warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true)
// and validates its parts: the user ID, the session ID, the AZ.

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/azkafka/azkafka/azdetect"
	"github.com/azkafka/azkafka/internal/settings"
)

// Keys of the client ID pairs the SDK owns. A WarpStream agent splits the
// client ID on ',' and then on '='; there is no escaping, which is why no
// value may contain either byte.
const (
	keySessionID   = "warpstream_session_id"
	keyAZ          = "warpstream_az"
	keyInterzoneLB = "warpstream_interzone_lb"
)

// MaxClientIDLen is the longest client ID Kafka's request header can carry:
// it is a protocol STRING, whose length is a signed 16-bit integer.
const MaxClientIDLen = 32767

// ClientIDParts are the fields of a client ID in the format
//
//	[<user id>,]warpstream_session_id=<uuid>,warpstream_az=<az>,warpstream_interzone_lb=true
type ClientIDParts struct {
	// UserID is the application's own client ID, sent first. It may hold
	// several ','-separated segments; segments whose key starts with
	// "warpstream_" or "ws_" are dropped by ClientID (the SDK's pairs
	// replace them). Empty: no user segment.
	UserID string
	// SessionID identifies one client instance across reconnects: a UUID in
	// canonical 8-4-4-4-12 form. Required.
	SessionID string
	// AZ is the client's availability zone. Empty: the warpstream_az pair is
	// omitted and the agent cannot route by zone.
	AZ string
	// InterzoneLB asks the agent to close connections that cross zones when
	// an agent exists in the client's zone. False: the pair is omitted.
	InterzoneLB bool
}

// ClientID returns the client ID for p, or an error naming the invalid
// field. It is a pure function, safe for concurrent use.
func ClientID(p ClientIDParts) (string, error) {
	id, err := clientID(p)
	if err != nil {
		return "", fmt.Errorf("sdk: %w", err)
	}
	return id, nil
}

func clientID(p ClientIDParts) (string, error) {
	user, err := cleanUserID(p.UserID)
	if err != nil {
		return "", err
	}
	if err := validSessionID(p.SessionID); err != nil {
		return "", fmt.Errorf("session ID %s: %w", quote(p.SessionID), err)
	}
	if p.AZ != "" {
		if err := validAZ(p.AZ); err != nil {
			return "", fmt.Errorf("AZ %s: %w", quote(p.AZ), err)
		}
	}
	var b strings.Builder
	b.Grow(len(user) + 128)
	if user != "" {
		b.WriteString(user)
		b.WriteByte(',')
	}
	b.WriteString(keySessionID)
	b.WriteByte('=')
	b.WriteString(p.SessionID)
	if p.AZ != "" {
		b.WriteString("," + keyAZ + "=")
		b.WriteString(p.AZ)
	}
	if p.InterzoneLB {
		b.WriteString("," + keyInterzoneLB + "=true")
	}
	if b.Len() > MaxClientIDLen {
		return "", fmt.Errorf("client ID is %d bytes, longer than Kafka's limit of %d", b.Len(), MaxClientIDLen)
	}
	return b.String(), nil
}

// ParseClientID splits a client ID in the format ClientID produces. The SDK
// pairs may come in any order after the user segments; unknown
// "warpstream_"/"ws_" keys, duplicated pairs, a missing session ID and
// invalid values are errors. ParseClientID(id) followed by ClientID gives
// back an ID that parses to the same parts. Safe for concurrent use.
func ParseClientID(s string) (ClientIDParts, error) {
	p, err := parseClientID(s)
	if err != nil {
		return ClientIDParts{}, fmt.Errorf("sdk: %w", err)
	}
	return p, nil
}

func parseClientID(s string) (ClientIDParts, error) {
	var p ClientIDParts
	if len(s) > MaxClientIDLen {
		return p, fmt.Errorf("client ID is %d bytes, longer than Kafka's limit of %d", len(s), MaxClientIDLen)
	}
	if s == "" {
		return p, errors.New("client ID is empty")
	}
	var user []string
	seen := map[string]bool{}
	for seg := range strings.SplitSeq(s, ",") {
		key, val, hasEq := strings.Cut(seg, "=")
		if !hasEq || !isSDKKey(key) {
			if len(seen) > 0 {
				return ClientIDParts{}, fmt.Errorf("client ID %s: user segment %s after the SDK pairs", quote(s), quote(seg))
			}
			user = append(user, seg)
			continue
		}
		if seen[key] {
			return ClientIDParts{}, fmt.Errorf("client ID %s: duplicated key %q", quote(s), key)
		}
		seen[key] = true
		switch key {
		case keySessionID:
			if err := validSessionID(val); err != nil {
				return ClientIDParts{}, fmt.Errorf("client ID %s: %s=%s: %w", quote(s), key, quote(val), err)
			}
			p.SessionID = val
		case keyAZ:
			if err := validAZ(val); err != nil {
				return ClientIDParts{}, fmt.Errorf("client ID %s: %s=%s: %w", quote(s), key, quote(val), err)
			}
			p.AZ = val
		case keyInterzoneLB:
			switch val {
			case "true":
				p.InterzoneLB = true
			case "false":
			default:
				return ClientIDParts{}, fmt.Errorf("client ID %s: %s=%s: want true or false", quote(s), key, quote(val))
			}
		default:
			return ClientIDParts{}, fmt.Errorf("client ID %s: unknown key %q", quote(s), key)
		}
	}
	if !seen[keySessionID] {
		return ClientIDParts{}, fmt.Errorf("client ID %s: no %s pair", quote(s), keySessionID)
	}
	p.UserID = strings.Join(user, ",")
	if _, err := cleanUserID(p.UserID); err != nil {
		return ClientIDParts{}, err
	}
	return p, nil
}

// isSDKKey reports whether key belongs to the namespace the SDK owns.
func isSDKKey(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "warpstream_") || strings.HasPrefix(k, "ws_")
}

// cleanUserID validates a user client ID and drops its warpstream_*/ws_*
// pairs, which the SDK's own pairs replace.
func cleanUserID(id string) (string, error) {
	if id == "" {
		return "", nil
	}
	if len(id) > MaxClientIDLen {
		return "", fmt.Errorf("user client ID is %d bytes, longer than Kafka's limit of %d", len(id), MaxClientIDLen)
	}
	if !utf8.ValidString(id) {
		return "", fmt.Errorf("user client ID %s: not valid UTF-8", quote(id))
	}
	kept := make([]string, 0, 4)
	for seg := range strings.SplitSeq(id, ",") {
		if seg == "" {
			return "", fmt.Errorf("user client ID %s: empty segment (stray ',')", quote(id))
		}
		if i := strings.IndexFunc(seg, isControl); i >= 0 {
			return "", fmt.Errorf("user client ID %s: control character at byte %d of segment %s", quote(id), i, quote(seg))
		}
		key, val, hasEq := strings.Cut(seg, "=")
		if hasEq && (key == "" || strings.Contains(val, "=")) {
			return "", fmt.Errorf("user client ID %s: segment %s must be a name or one key=value pair", quote(id), quote(seg))
		}
		if hasEq && isSDKKey(key) {
			continue
		}
		kept = append(kept, seg)
	}
	return strings.Join(kept, ","), nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// validSessionID accepts a UUID in canonical lower-case 8-4-4-4-12 form.
func validSessionID(s string) error {
	if len(s) != 36 {
		return errors.New("not a UUID (want 8-4-4-4-12 lower-case hex)")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return errors.New("not a UUID (want 8-4-4-4-12 lower-case hex)")
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return errors.New("not a UUID (want 8-4-4-4-12 lower-case hex)")
			}
		}
	}
	return nil
}

// validAZ accepts exactly what azdetect.Validate accepts, untrimmed: lower-case
// letters, digits and '-', so never ',' or '='.
func validAZ(az string) error {
	v, err := azdetect.Validate(az)
	if err != nil {
		return err
	}
	if v != az {
		return errors.New("surrounding whitespace")
	}
	return nil
}

// quote quotes s for an error message, truncated to 64 bytes.
func quote(s string) string { return settings.Quote(s) }
