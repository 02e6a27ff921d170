#!/usr/bin/perl
# t/proto/storage.t: the text storage commands set, add, replace, append,
# prepend and cas: their replies, what they leave stored, flags, empty and
# binary values, and noreply.
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server('-m', '64');
my $s = $srv->connect;

# set
mc_is($s, "set foo 0 0 3\r\nbar\r\n", "STORED\r\n", 'set stores a new key');
mc_is($s, "get foo\r\n", "VALUE foo 0 3\r\nbar\r\nEND\r\n", 'get returns what set stored');
mc_is($s, "set foo 7 0 4\r\nbarz\r\n", "STORED\r\n", 'set replaces an existing key');
mc_is($s, "get foo\r\n", "VALUE foo 7 4\r\nbarz\r\nEND\r\n", 'set replaced value and flags');
mc_is($s, "set empty 0 0 0\r\n\r\n", "STORED\r\n", 'set accepts an empty value');
mc_is($s, "get empty\r\n", "VALUE empty 0 0\r\n\r\nEND\r\n", 'empty value comes back empty');
mc_is($s, "set flags32 4294967295 0 1\r\nx\r\n", "STORED\r\n", 'flags may use all 32 bits');
mc_is($s, "get flags32\r\n", "VALUE flags32 4294967295 1\r\nx\r\nEND\r\n",
    '32-bit flags come back unchanged');

my $binary = join '', map { chr } 0 .. 255;
$binary .= "\r\nEND\r\n\0\r\n";
my $blen = length $binary;
mc_is($s, "set bin 0 0 $blen\r\n$binary\r\n", "STORED\r\n",
    'set stores a value holding every byte, CR LF and END');
mc_is($s, "get bin\r\n", "VALUE bin 0 $blen\r\n$binary\r\nEND\r\n",
    'binary value comes back byte for byte');

my $key250 = 'k' x 250;
mc_is($s, "set $key250 0 0 2\r\nok\r\n", "STORED\r\n", 'a 250-byte key is accepted');
mc_is($s, "get $key250\r\n", "VALUE $key250 0 2\r\nok\r\nEND\r\n", 'a 250-byte key is retrievable');

my $utf8key = "cl\xc3\xa9_\xe2\x9c\x93_\xe6\x97\xa5";    # UTF-8 bytes, no spaces or controls
mc_is($s, "set $utf8key 0 0 4\r\nutf8\r\n", "STORED\r\n", 'a key made of UTF-8 bytes is accepted');
mc_is($s, "get $utf8key\r\n", "VALUE $utf8key 0 4\r\nutf8\r\nEND\r\n", 'and comes back byte for byte');

my $big = 'v' x (512 * 1024);
mc_is($s, "set big 0 0 " . length($big) . "\r\n$big\r\n", "STORED\r\n",
    'a 512 KiB value is stored with the default -I');
mc_is($s, "get big\r\n", "VALUE big 0 " . length($big) . "\r\n$big\r\nEND\r\n",
    'a 512 KiB value comes back whole');

# add
mc_is($s, "add foo 0 0 3\r\nnew\r\n", "NOT_STORED\r\n", 'add refuses an existing key');
mc_is($s, "get foo\r\n", "VALUE foo 7 4\r\nbarz\r\nEND\r\n", 'refused add left the value alone');
mc_is($s, "add newkey 3 0 3\r\nnew\r\n", "STORED\r\n", 'add stores a missing key');
mc_is($s, "get newkey\r\n", "VALUE newkey 3 3\r\nnew\r\nEND\r\n", 'added value is there');

# replace
mc_is($s, "replace nosuch 0 0 1\r\nx\r\n", "NOT_STORED\r\n", 'replace refuses a missing key');
mc_is($s, "get nosuch\r\n", "END\r\n", 'refused replace stored nothing');
mc_is($s, "replace newkey 9 0 5\r\nnewer\r\n", "STORED\r\n", 'replace updates an existing key');
mc_is($s, "get newkey\r\n", "VALUE newkey 9 5\r\nnewer\r\nEND\r\n", 'replace changed value and flags');

# append / prepend
mc_is($s, "append nosuch 0 0 1\r\nx\r\n", "NOT_STORED\r\n", 'append to a missing key is NOT_STORED');
mc_is($s, "prepend nosuch 0 0 1\r\nx\r\n", "NOT_STORED\r\n", 'prepend to a missing key is NOT_STORED');
mc_is($s, "get nosuch\r\n", "END\r\n", 'failed append/prepend created nothing');
mc_is($s, "set ap 5 0 3\r\nmid\r\n", "STORED\r\n", 'set for append/prepend');
mc_is($s, "append ap 0 0 4\r\n_end\r\n", "STORED\r\n", 'append to an existing key');
mc_is($s, "prepend ap 0 0 6\r\nstart_\r\n", "STORED\r\n", 'prepend to an existing key');
mc_is($s, "get ap\r\n", "VALUE ap 5 13\r\nstart_mid_end\r\nEND\r\n",
    'append and prepend join the data and keep the original flags');
mc_is($s, "append ap 99 0 0\r\n\r\n", "STORED\r\n", 'append of an empty value');
mc_is($s, "get ap\r\n", "VALUE ap 5 13\r\nstart_mid_end\r\nEND\r\n",
    'append ignores the new flags');

# cas
mc_send($s, "gets ap\r\n");
my $line = mc_line($s);
like($line, qr/^VALUE ap 5 13 (\d+)\r\n\z/, 'gets returns a cas unique');
my ($cas) = $line =~ /(\d+)\r\n\z/;
$cas //= 0;
is(mc_until($s, "END\r\n"), "start_mid_end\r\nEND\r\n", 'gets returns the data');
my $wrong = $cas + 1000;
mc_is($s, "cas ap 0 0 1 $wrong\r\nX\r\n", "EXISTS\r\n", 'cas with a stale unique is EXISTS');
mc_is($s, "get ap\r\n", "VALUE ap 5 13\r\nstart_mid_end\r\nEND\r\n", 'EXISTS left the value alone');
mc_is($s, "cas ap 2 0 3 $cas\r\nnew\r\n", "STORED\r\n", 'cas with the current unique stores');
mc_is($s, "get ap\r\n", "VALUE ap 2 3\r\nnew\r\nEND\r\n", 'cas stored value and flags');
mc_is($s, "cas ap 2 0 3 $cas\r\nold\r\n", "EXISTS\r\n", 'a unique is spent once the item changed');
mc_is($s, "cas nosuch 0 0 1 $cas\r\nx\r\n", "NOT_FOUND\r\n", 'cas on a missing key is NOT_FOUND');
mc_is($s, "get nosuch\r\n", "END\r\n", 'cas NOT_FOUND stored nothing');

# Every modification gives a new cas unique; a second client's write makes
# the first client's cas fail.
my $s2 = $srv->connect;
mc_send($s, "gets ap\r\n");
my ($c1) = mc_until($s, "END\r\n") =~ /^VALUE ap 2 3 (\d+)\r\n/;
mc_is($s2, "append ap 0 0 1\r\n!\r\n", "STORED\r\n", 'second client appends');
mc_send($s, "gets ap\r\n");
my ($c2) = mc_until($s, "END\r\n") =~ /^VALUE ap 2 4 (\d+)\r\n/;
ok(defined $c1 && defined $c2 && $c1 ne $c2, 'append gives the item a new cas unique');
mc_is($s, "cas ap 0 0 1 $c1\r\nZ\r\n", "EXISTS\r\n", 'cas with the unique from before the append fails');

# noreply on every storage command: nothing comes back, the effects happen.
mc_send($s, "set nr 1 0 1 noreply\r\na\r\n"
      . "add nr 0 0 1 noreply\r\nb\r\n"
      . "add nr2 0 0 1 noreply\r\nc\r\n"
      . "replace nr 2 0 1 noreply\r\nd\r\n"
      . "replace nr3 0 0 1 noreply\r\ne\r\n"
      . "append nr 0 0 1 noreply\r\nf\r\n"
      . "prepend nr 0 0 1 noreply\r\ng\r\n"
      . "cas nr2 0 0 1 1 noreply\r\nh\r\n"
      . "cas nr4 0 0 1 1 noreply\r\ni\r\n");
ok(mc_silent($s, 0.3), 'noreply storage commands send nothing back');
mc_is($s, "get nr nr2 nr3 nr4\r\n", "VALUE nr 2 3\r\ngdf\r\nVALUE nr2 0 1\r\nc\r\nEND\r\n",
    'noreply storage commands took effect (or were refused) as with replies');
mc_send($s, "gets nr2\r\n");
my ($c3) = mc_until($s, "END\r\n") =~ /^VALUE nr2 0 1 (\d+)\r\n/;
mc_send($s, "cas nr2 0 0 2 $c3 noreply\r\nok\r\n");
mc_is($s, "get nr2\r\n", "VALUE nr2 0 2\r\nok\r\nEND\r\n", 'cas noreply with the right unique stores');

# A value may be sent in pieces.
mc_send($s, "set slow 0 0 10\r\n01234");
ok(mc_silent($s, 0.2), 'no reply while the data block is incomplete');
mc_send($s, "56789");
ok(mc_silent($s, 0.2), 'no reply before the terminating CR LF');
mc_is($s, "\r\n", "STORED\r\n", 'data block sent in pieces is stored');
mc_is($s, "get slow\r\n", "VALUE slow 0 10\r\n0123456789\r\nEND\r\n", 'pieced value is whole');

# Value sizes across slab classes and around chunk boundaries: every value
# comes back byte for byte, also after append and prepend.
{
    my @sizes = (0 .. 70, map({ $_ * 37 } 2 .. 150), map({ (2**$_ - 1, 2**$_, 2**$_ + 1) } 10 .. 19),
        524_288 - 60 .. 524_288 + 3, 1_000_000);
    my $bad = 0;
    my $n = 0;
    for my $size (@sizes) {
        my $v = join '', map { chr(($size + $_ * 7) % 256) } 0 .. ($size > 600 ? 599 : $size - 1);
        $v = substr($v x (1 + int($size / 600)), 0, $size);
        mc_send($s, "set size$n 3 0 $size\r\n$v\r\nget size$n\r\n");
        my $want = "STORED\r\nVALUE size$n 3 $size\r\n$v\r\nEND\r\n";
        my $got = mc_bytes($s, length $want);
        if ($got ne $want) { $bad++; diag("size $size: reply differs") if $bad <= 5; mc_resync($s) }
        $n++;
    }
    is($bad, 0, 'values of ' . scalar(@sizes) . ' sizes from 0 to 1,000,000 bytes come back byte for byte');
    my $v = 'p' x 700_000;
    mc_is($s, "set grow 0 0 700000\r\n$v\r\n", "STORED\r\n", 'set a 700,000-byte value');
    mc_is($s, "append grow 0 0 200000\r\n" . ('a' x 200_000) . "\r\n", "STORED\r\n", 'append 200,000 bytes to it');
    mc_is($s, "prepend grow 0 0 50000\r\n" . ('b' x 50_000) . "\r\n", "STORED\r\n", 'prepend 50,000 bytes to it');
    mc_is($s, "get grow\r\n", "VALUE grow 0 950000\r\n" . ('b' x 50_000) . $v . ('a' x 200_000) . "\r\nEND\r\n",
        'the 950,000-byte result is whole and in order');
}

# Values stored on one connection are seen on another.
mc_is($s2, "get foo newkey\r\n", "VALUE foo 7 4\r\nbarz\r\nVALUE newkey 9 5\r\nnewer\r\nEND\r\n",
    'another connection sees the stored values');

my $st = mc_stats($s);
ok($st->{cmd_set} >= 30, "cmd_set counts storage commands ($st->{cmd_set})");
ok($st->{cas_hits} >= 2 && $st->{cas_badval} >= 3 && $st->{cas_misses} >= 2,
    "cas_hits/cas_badval/cas_misses count ($st->{cas_hits}/$st->{cas_badval}/$st->{cas_misses})");

close $s;
close $s2;
$srv->stop;
done_testing;
