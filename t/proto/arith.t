#!/usr/bin/perl
# t/proto/arith.t: incr and decr: results, 64-bit wrap, decr floor at 0,
# 20-digit values, non-numeric values, invalid deltas, noreply, misses, and
# what incr/decr leave stored (flags kept, new cas unique).
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server();
my $s = $srv->connect;

# The stored form after incr/decr may be space padded on the right
# (the protocol allows it), so stored values are compared without it.
sub stored_number {
    my ($key) = @_;
    mc_send($s, "get $key\r\n");
    my $r = mc_until($s, "END\r\n");
    return undef unless $r =~ /^VALUE \Q$key\E (\d+) (\d+)\r\n/;
    my ($flags, $len) = ($1, $2);
    my $data = substr($r, length("VALUE $key $flags $len\r\n"), $len);
    $data =~ s/ +\z//;
    return "$flags:$data";
}

mc_is($s, "incr nosuch 1\r\n", "NOT_FOUND\r\n", 'incr of a missing key is NOT_FOUND');
mc_is($s, "decr nosuch 1\r\n", "NOT_FOUND\r\n", 'decr of a missing key is NOT_FOUND');
mc_is($s, "get nosuch\r\n", "END\r\n", 'incr/decr do not create missing keys');

mc_is($s, "set n 5 0 1\r\n1\r\n", "STORED\r\n", 'set a number');
mc_is($s, "incr n 1\r\n", "2\r\n", 'incr by 1');
mc_is($s, "incr n 8\r\n", "10\r\n", 'incr that adds a digit');
is(stored_number('n'), '5:10', 'incr stored the new value and kept the flags');
mc_is($s, "incr n 0\r\n", "10\r\n", 'incr by 0');
mc_is($s, "decr n 1\r\n", "9\r\n", 'decr that removes a digit');
is(stored_number('n'), '5:9', 'decr stored the new value');
mc_is($s, "decr n 100\r\n", "0\r\n", 'decr below zero stops at 0');
mc_is($s, "decr n 1\r\n", "0\r\n", 'decr of 0 stays 0');
mc_is($s, "incr n 00012\r\n", "12\r\n", 'a delta with leading zeros is decimal');

# 64-bit limits
mc_is($s, "set big 0 0 20\r\n18446744073709551615\r\n", "STORED\r\n", 'set 2^64-1');
mc_is($s, "incr big 1\r\n", "0\r\n", 'incr past 2^64-1 wraps to 0');
mc_is($s, "set big 0 0 20\r\n18446744073709551610\r\n", "STORED\r\n", 'set 2^64-6');
mc_is($s, "incr big 10\r\n", "4\r\n", 'incr wraps modulo 2^64');
mc_is($s, "set big 0 0 1\r\n1\r\n", "STORED\r\n", 'set 1');
mc_is($s, "incr big 18446744073709551615\r\n", "0\r\n", 'the largest 64-bit delta is accepted (and wraps)');
mc_is($s, "decr big 18446744073709551615\r\n", "0\r\n", 'decr by the largest delta');
mc_is($s, "set big 0 0 19\r\n9999999999999999999\r\n", "STORED\r\n", 'set a 19-digit number');
mc_is($s, "incr big 1\r\n", "10000000000000000000\r\n", 'incr to a 20-digit result');
is(stored_number('big'), '0:10000000000000000000', '20-digit result is stored');
mc_is($s, "decr big 1\r\n", "9999999999999999999\r\n", 'decr from 20 digits to 19');
mc_is($s, "set z 0 0 20\r\n00000000000000000001\r\n", "STORED\r\n", 'set a zero-padded 20-digit number');
mc_is($s, "incr z 1\r\n", "2\r\n", 'leading zeros in the value are read as decimal');

# memcached itself may leave a number space padded (see above), so a number
# followed by spaces is still a number.
mc_is($s, "set sp 0 0 4\r\n12  \r\n", "STORED\r\n", 'set a number followed by spaces');
mc_is($s, "incr sp 1\r\n", "13\r\n", 'incr of a number with trailing spaces');
mc_is($s, "decr sp 2\r\n", "11\r\n", 'decr of a number with trailing spaces');
mc_is($s, "set sp 0 0 2\r\n10\r\n", "STORED\r\n", 'set 10');
mc_is($s, "decr sp 1\r\n", "9\r\n", 'decr 10 to 9 (may be stored as "9 ")');
mc_is($s, "incr sp 1\r\n", "10\r\n", 'incr of the value decr left behind');

# invalid deltas
for my $d ('x', '-1', '1.5', '0x10', '18446744073709551616', '99999999999999999999999') {
    mc_is($s, "incr n $d\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n",
        "incr with delta '$d' is an invalid numeric delta");
    mc_is($s, "decr n $d\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n",
        "decr with delta '$d' is an invalid numeric delta");
}
is(stored_number('n'), '5:12', 'invalid deltas left the value alone');

# non-numeric values
for my $v ('abc', '12abc', '-12', '', '1' x 21) {
    my $len = length $v;
    mc_is($s, "set nn 3 0 $len\r\n$v\r\n", "STORED\r\n", "set value '$v'");
    mc_is($s, "incr nn 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        "incr of '$v' is refused as non-numeric");
    mc_is($s, "decr nn 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        "decr of '$v' is refused as non-numeric");
    mc_is($s, "get nn\r\n", "VALUE nn 3 $len\r\n$v\r\nEND\r\n", "non-numeric '$v' is unchanged");
}

# cas unique changes on incr
mc_is($s, "set c 0 0 1\r\n5\r\n", "STORED\r\n", 'set for cas check');
mc_send($s, "gets c\r\n");
my ($u1) = mc_until($s, "END\r\n") =~ /^VALUE c 0 1 (\d+)\r\n/;
mc_is($s, "incr c 1\r\n", "6\r\n", 'incr');
mc_send($s, "gets c\r\n");
my ($u2) = mc_until($s, "END\r\n") =~ /^VALUE c 0 1 (\d+)\r\n/;
ok(defined $u1 && defined $u2 && $u1 ne $u2, 'incr gives a new cas unique');
mc_is($s, "cas c 0 0 1 $u1\r\n9\r\n", "EXISTS\r\n", 'cas with the unique from before incr fails');

# noreply
mc_is($s, "set r 0 0 2\r\n10\r\n", "STORED\r\n", 'set for noreply');
mc_send($s, "incr r 5 noreply\r\ndecr r 2 noreply\r\nincr nosuch 1 noreply\r\ndecr nosuch 1 noreply\r\n");
ok(mc_silent($s, 0.3), 'incr/decr noreply send nothing');
is(stored_number('r'), '0:13', 'incr/decr noreply took effect');
mc_send($s, "set txt 0 0 3\r\nabc\r\n");
is(mc_line($s), "STORED\r\n", 'set a non-numeric value');
mc_send($s, "incr txt 1 noreply\r\ndecr txt 1 noreply\r\n");
ok(mc_silent($s, 0.3), 'incr/decr noreply of a non-numeric value send no error either (a client that said noreply reads nothing)');

# A second connection sees every increment (no lost updates over 200 incrs).
my $s2 = $srv->connect;
mc_is($s, "set cnt 0 0 1\r\n0\r\n", "STORED\r\n", 'set a counter');
mc_send($s, "incr cnt 1\r\n" x 100);
mc_send($s2, "incr cnt 1\r\n" x 100);
my $r1 = mc_bytes($s, 1, 5) . mc_line($s);
my @a = ();
for (1 .. 99) { push @a, mc_line($s) }
my @b = map { mc_line($s2) } 1 .. 100;
my $max = 0;
for (@a, @b, $r1) { $max = $1 if /^(\d+)\r\n\z/ && $1 > $max }
is($max, 200, 'two connections doing 100 incrs each reach 200');
is(stored_number('cnt'), '0:200', 'counter stored 200');

my $st = mc_stats($s);
ok($st->{incr_hits} > 200 && $st->{incr_misses} >= 2, "incr_hits/incr_misses count ($st->{incr_hits}/$st->{incr_misses})");
ok($st->{decr_hits} >= 5 && $st->{decr_misses} >= 2, "decr_hits/decr_misses count ($st->{decr_hits}/$st->{decr_misses})");

close $s;
close $s2;
$srv->stop;
done_testing;
