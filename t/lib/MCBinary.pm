# MCBinary.pm: a raw-socket client for memcached's binary protocol, for the
# TAP suites in t/binary and t/tools. Builds request frames (24-byte header,
# extras, key, value; big-endian fields) and reads response frames with
# bounded waits. Sockets come from MCTest ($srv->connect) and share its read
# buffer, so MCTest's mc_silent/mc_eof work on them too. Knows nothing about
# what a test expects.
#
# API (all exported):
#   bin_req(op, %a)        a request frame; %a: key, extras, value, opaque,
#                          cas, magic, and keylen/extlen/bodylen to lie about
#   ext_store(flags, exp)  extras of set/add/replace
#   ext_arith(delta, initial, exp)   extras of incr/decr
#   ext_exp(exp)           extras of touch/gat/flush
#   bin_read($s [, $timeout])  next response as a hashref (magic opcode
#                          keylen extlen datatype status bodylen opaque cas
#                          extras key value), undef on timeout or EOF
#   bin_call($s, $frame)   send one frame, read one response
#   bin_op($s, op, key, value, extras)   one request; returns (status, body)
#                          where body is extras . key . value of the reply,
#                          ('', '') on timeout or EOF
#   bin_stats($s [, $group])   hashref of a binary STAT group, undef when
#                          the server answers an error
#   flags_of($resp)        the 32-bit flags in a get reply's extras
#   u64_of($bytes)         an 8-byte big-endian number
#   %OP, %ST               opcode and status numbers by name
package MCBinary;
use strict;
use warnings;
use Exporter 'import';
use MCTest qw(mc_send mc_bytes);

our @EXPORT = qw(bin_req ext_store ext_arith ext_exp bin_read bin_call bin_op bin_stats
  flags_of u64_of %OP %ST);

our %OP = (
    get => 0x00, set => 0x01, add => 0x02, replace => 0x03, delete => 0x04,
    incr => 0x05, decr => 0x06, quit => 0x07, flush => 0x08, getq => 0x09,
    noop => 0x0a, version => 0x0b, getk => 0x0c, getkq => 0x0d, append => 0x0e,
    prepend => 0x0f, stat => 0x10, setq => 0x11, addq => 0x12, replaceq => 0x13,
    deleteq => 0x14, incrq => 0x15, decrq => 0x16, quitq => 0x17, flushq => 0x18,
    appendq => 0x19, prependq => 0x1a, verbosity => 0x1b, touch => 0x1c,
    gat => 0x1d, gatq => 0x1e, sasl_list_mechs => 0x20, sasl_auth => 0x21,
    sasl_step => 0x22, gatk => 0x23, gatkq => 0x24,
);

our %ST = (
    success => 0x00, key_enoent => 0x01, key_eexists => 0x02, e2big => 0x03,
    einval => 0x04, not_stored => 0x05, delta_badval => 0x06,
    auth_error => 0x20, unknown_command => 0x81, enomem => 0x82,
);

sub bin_req {
    my ($op, %a) = @_;
    my $key    = $a{key}    // '';
    my $extras = $a{extras} // '';
    my $value  = $a{value}  // '';
    my $keylen = $a{keylen} // length $key;
    my $extlen = $a{extlen} // length $extras;
    my $bodylen = $a{bodylen} // (length($key) + length($extras) + length($value));
    return pack('C C n C C n N N Q>', $a{magic} // 0x80, $op, $keylen, $extlen, 0, 0,
        $bodylen, $a{opaque} // 0, $a{cas} // 0) . $extras . $key . $value;
}

sub ext_store { pack('N N', $_[0] // 0, $_[1] // 0) }
sub ext_arith { pack('Q> Q> N', $_[0], $_[1] // 0, $_[2] // 0) }
sub ext_exp   { pack('N', $_[0] // 0) }

sub bin_read {
    my ($s, $timeout) = @_;
    my $head = mc_bytes($s, 24, $timeout);
    return undef unless length $head == 24;
    my %r;
    @r{qw(magic opcode keylen extlen datatype status bodylen opaque cas)} =
      unpack('C C n C C n N N Q>', $head);
    my $body = $r{bodylen} ? mc_bytes($s, $r{bodylen}, $timeout) : '';
    return undef unless length $body == $r{bodylen};
    $r{extras} = substr($body, 0, $r{extlen});
    $r{key}    = substr($body, $r{extlen}, $r{keylen});
    $r{value}  = substr($body, $r{extlen} + $r{keylen});
    return \%r;
}

sub bin_call {
    my ($s, $frame, $timeout) = @_;
    mc_send($s, $frame);
    return bin_read($s, $timeout);
}

sub bin_op {
    my ($s, $op, $key, $value, $extras) = @_;
    my $r = bin_call($s, bin_req($op, key => $key, value => $value, extras => $extras, opaque => 7));
    return ('', '') unless $r;
    return ($r->{status}, $r->{extras} . $r->{key} . $r->{value});
}

sub bin_stats {
    my ($s, $group) = @_;
    mc_send($s, bin_req($OP{stat}, key => $group // ''));
    my %st;
    for (1 .. 100000) {
        my $r = bin_read($s) or return undef;
        return undef if $r->{status} != 0;
        return \%st if $r->{keylen} == 0 && $r->{bodylen} == 0;
        $st{ $r->{key} } = $r->{value};
    }
    return undef;
}

sub flags_of { unpack('N', $_[0]{extras}) }

sub u64_of { unpack('Q>', $_[0]) }

1;
