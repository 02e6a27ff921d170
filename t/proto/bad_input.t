#!/usr/bin/perl
# t/proto/bad_input.t: malformed requests: bad or negative numbers, missing
# arguments, wrong data-chunk lengths, missing terminators, binary junk and
# very long lines. After each one the server must keep serving (the same
# connection where memcached keeps it open, and other connections) and no
# stored key may change.
use strict;
use warnings;
use Test::More;
use Socket ();
use MCTest;

my $srv = start_server('-m', '64');
my $s = $srv->connect;

my %sentinel = (s1 => 'first', s2 => "bin\r\n\0ary", s3 => '12345');
for my $k (sort keys %sentinel) {
    my $v = $sentinel{$k};
    mc_is($s, "set $k 7 0 " . length($v) . "\r\n$v\r\n", "STORED\r\n", "sentinel $k stored");
}
my $sentinel_reply = join('', map { "VALUE $_ 7 " . length($sentinel{$_}) . "\r\n$sentinel{$_}\r\n" } sort keys %sentinel)
  . "END\r\n";

# Another connection sees every sentinel unchanged.
sub intact {
    my ($what) = @_;
    my $o = $srv->connect;
    mc_is($o, "get " . join(' ', sort keys %sentinel) . "\r\n", $sentinel_reply,
        "after $what: another connection is served and stored keys are unchanged");
    close $o;
}

# The same connection answers again (errors in between are allowed).
sub same_conn {
    my ($sock, $what) = @_;
    ok(mc_resync($sock), "after $what: the same connection answers again");
}

my @bad_lines = (
    ['set k x 0 1',           'non-numeric flags'],
    ['set k -1 0 1',          'negative flags'],
    ['set k 0 x 1',           'non-numeric exptime'],
    ['set k 0 0 x',           'non-numeric length'],
    ['set k 0 0 -1',          'negative length'],
    ['set k 0 0 99999999999999999999', 'length beyond 64 bits'],
    ['set k 0 0 2147483647',  'length of 2^31-1'],
    ['set k 0 0 4294967295',  'length of 2^32-1'],
    ['cas k 0 0 1 x',         'non-numeric cas unique'],
    ['cas k 0 0 1 -1',        'negative cas unique'],
    ['add s1 x 0 1',          'add with non-numeric flags'],
    ['append s1 0 0 x',       'append with non-numeric length'],
);
for my $case (@bad_lines) {
    my ($line, $what) = @$case;
    mc_send($s, "$line\r\n");
    is(mc_line($s), "CLIENT_ERROR bad command line format\r\n", "$what: CLIENT_ERROR bad command line format");
    same_conn($s, $what);
    mc_is($s, "get k\r\n", "END\r\n", "$what: nothing stored under k");
    intact($what);
}

for my $case (['set k 0 0', 'set without a length'], ['set k', 'set without flags'], ['set', 'bare set'],
    ['cas k 0 0 1', 'cas without a unique'], ['get', 'get without keys'], ['incr k', 'incr without a delta'],
    ['incr', 'bare incr'], ['delete', 'bare delete'], ['touch k', 'touch without exptime'],
    ['gat', 'bare gat'])
{
    my ($line, $what) = @$case;
    mc_is($s, "$line\r\n", "ERROR\r\n", "$what: ERROR");
    intact($what);
}

mc_is($s, "touch s1 x\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 'touch with a non-numeric exptime');
mc_is($s, "gat x s1\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 'gat with a non-numeric exptime');
mc_is($s, "flush_all x\r\n", "CLIENT_ERROR invalid exptime argument\r\n", 'flush_all with a non-numeric delay');
mc_is($s, "delete s1 x\r\n", "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
    'delete with a junk argument shows its usage');
mc_is($s, "verbosity x\r\n", "CLIENT_ERROR bad command line format\r\n", 'verbosity with a non-number');
mc_is($s, "incr s3 x\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n", 'incr with a bad delta');
intact('bad numeric arguments to other commands');

# Wrong data-chunk length: more bytes than announced.
mc_send($s, "set s1 0 0 1\r\nxy\r\n");
is(mc_line($s), "CLIENT_ERROR bad data chunk\r\n", 'data block longer than announced: CLIENT_ERROR bad data chunk');
same_conn($s, 'a too long data block');
intact('a too long data block (the old value survives)');

# Data block not followed by CR LF.
mc_send($s, "set s2 0 0 3\r\nabcXY");
is(mc_line($s), "CLIENT_ERROR bad data chunk\r\n", 'data block without CR LF after it: CLIENT_ERROR bad data chunk');
mc_send($s, "\r\n");
same_conn($s, 'a data block without its terminator');
intact('a data block without its terminator');

# Fewer bytes than announced: the server waits for the rest.
mc_send($s, "set short 0 0 11\r\nabc\r\n");
ok(mc_silent($s, 0.3), 'a data block shorter than announced is waited for');
mc_send($s, "defg\r\n");    # 5 + 6 = the 11 announced bytes
ok(mc_silent($s, 0.3), 'CR LF inside the announced length does not end the block');
mc_is($s, "\r\n", "STORED\r\n", 'the CR LF after the announced length does');
mc_is($s, "get short\r\n", "VALUE short 0 11\r\nabc\r\ndefg\r\n\r\nEND\r\n", 'the value holds the inner CR LFs');

# A command line without its terminator is not executed until it ends.
mc_send($s, "get s1");
ok(mc_silent($s, 0.3), 'no reply to a command line without its line end');
mc_is($s, "\r\n", "VALUE s1 7 5\r\nfirst\r\nEND\r\n", 'the line runs when its end arrives');

# Binary junk (not starting with the binary protocol magic byte 0x80).
my $junk = join '', map { chr(($_ * 37 + 11) % 256) } 1 .. 200;
$junk =~ s/\x80/\x7f/g;
$junk =~ s/[\r\n]//g;
mc_send($s, "\x01$junk\r\n");
like(mc_line($s), qr/^(ERROR|CLIENT_ERROR [^\r\n]*)\r\n\z/, 'a line of binary junk gets an error line');
same_conn($s, 'binary junk');
intact('binary junk');
mc_send($s, "\0\0\0\0\r\n");
like(mc_line($s), qr/^(ERROR|CLIENT_ERROR [^\r\n]*)\r\n\z/, 'a line of NUL bytes gets an error line');
same_conn($s, 'NUL bytes');
mc_send($s, "get s1\0s2\r\nversion\r\n");
like(mc_until($s, "VERSION "), qr/VERSION \z/, 'a NUL inside a key gets some reply and the next command is answered');
mc_line($s);
intact('a NUL inside a key');

# Very long lines
my $long = 'x' x 3000;
mc_is($s, "$long\r\n", "ERROR\r\n", 'a 3000-byte unknown command line is ERROR');
intact('a 3000-byte line');
my @keys = map { "longline_key_$_" } 1 .. 500;
my $line = "get s1 @keys\r\n";
mc_is($s, $line, "VALUE s1 7 5\r\nfirst\r\nEND\r\n", 'a multi-get line of ' . length($line) . ' bytes is served');
my $k = 'k' x 5000;
mc_is($s, "get $k\r\n", "CLIENT_ERROR bad command line format\r\n", 'a get with a 5000-byte key is CLIENT_ERROR');
same_conn($s, 'a 5000-byte key');
{
    my $e = $srv->connect;
    mc_send($e, 'y' x (64 * 1024));
    ok(mc_eof($e, 5), 'a 64 KiB line with no line end makes the server close the connection');
    close $e;
}
intact('an endless line');

# Data after quit is ignored; a half-sent set on a closed connection stores nothing.
{
    my $e = $srv->connect;
    mc_send($e, "set half 0 0 100\r\nonly part");
    close $e;
    mc_is($s, "get half\r\n", "END\r\n", 'a set cut off by a closed connection stores nothing');
}

# Clients that vanish while the server is writing a large reply, or reset
# the connection mid-request, must not hurt the server.
{
    my $v = 'w' x (900 * 1024);
    mc_is($s, "set wide 0 0 " . length($v) . "\r\n$v\r\n", "STORED\r\n", 'a 900 KiB value for the vanishing readers');
    for my $i (1 .. 20) {
        my $e = $srv->connect;
        mc_send($e, "get wide wide wide wide\r\n");
        if ($i % 2) {
            close $e;
        }
        else {    # SO_LINGER 0: the close sends a reset
            setsockopt($e, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0));
            close $e;
        }
    }
    my $e = $srv->connect;
    mc_send($e, "set cut 0 0 1000\r\n" . ('c' x 500));
    setsockopt($e, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0));
    close $e;
    mc_is($s, "get cut\r\n", "END\r\n", 'a set reset mid-value stored nothing');
    intact('20 clients that left in the middle of 3.6 MB replies');
}

# HTTP requests sent to the cache port (cross-protocol attacks) are hung up
# on without a reply.
for my $http ("GET / HTTP/1.0\r\n", "PUT /a/b HTTP/1.1\r\n", "DELETE HTTP/1.1\r\n",
    "POST / HTTP/1.1\r\nHost: x\r\n\r\n")
{
    (my $name = $http) =~ s/\r\n.*//s;
    my $e = $srv->connect;
    mc_send($e, $http);
    is(mc_until($e, "\n", 5), '', "'$name': no reply");
    ok(mc_eof($e, 5), "'$name': the connection is closed");
    close $e;
}
intact('HTTP requests');

# An unknown word starting with a letter of memcached's commands (a c d g
# i s t) is answered ERROR even when the line ends in HTTP/: memcached
# checks for a web client only after those.
for my $word ("setx", "touchy", "azz", "czz", "dzz", "izz", "gzz") {
    mc_is($s, "$word a HTTP/1.1\r\n", "ERROR\r\n", "'$word a HTTP/1.1': ERROR, not a hang-up");
}
intact('unknown words ending in HTTP/');

# Many errors in a row do not hurt the connection.
mc_send($s, "bogus\r\n" x 200);
my $errors = 0;
for (1 .. 200) { $errors++ if mc_line($s) eq "ERROR\r\n" }
is($errors, 200, '200 unknown commands in one write get 200 ERROR lines');
intact('200 errors');

close $s;
$srv->stop;
done_testing;
