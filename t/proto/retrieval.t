#!/usr/bin/perl
# t/proto/retrieval.t: get, gets, gat, gats, touch and delete: multi-key
# replies, misses, cas uniques, touch semantics and noreply.
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server();
my $s = $srv->connect;

mc_is($s, "get nothing\r\n", "END\r\n", 'get of a missing key is just END');
mc_is($s, "gets nothing\r\n", "END\r\n", 'gets of a missing key is just END');
mc_is($s, "set a 1 0 1\r\nA\r\nset b 2 0 2\r\nBB\r\nset c 3 0 3\r\nCCC\r\n",
    "STORED\r\nSTORED\r\nSTORED\r\n", 'three keys stored');
mc_is($s, "get a b c\r\n", "VALUE a 1 1\r\nA\r\nVALUE b 2 2\r\nBB\r\nVALUE c 3 3\r\nCCC\r\nEND\r\n",
    'multi-key get returns the hits in request order');
mc_is($s, "get c x a y\r\n", "VALUE c 3 3\r\nCCC\r\nVALUE a 1 1\r\nA\r\nEND\r\n",
    'misses are left out of a multi-key get');
mc_is($s, "get a a\r\n", "VALUE a 1 1\r\nA\r\nVALUE a 1 1\r\nA\r\nEND\r\n",
    'a key asked twice comes back twice');
mc_is($s, "get  a   b \r\n", "VALUE a 1 1\r\nA\r\nVALUE b 2 2\r\nBB\r\nEND\r\n",
    'extra spaces between keys are ignored');
mc_is($s, "get a\n", "VALUE a 1 1\r\nA\r\nEND\r\n", 'a command line ended by a bare LF is accepted');

my @keys = map { "many$_" } 1 .. 100;
mc_send($s, join('', map { "set $_ 0 0 " . length($_) . " noreply\r\n$_\r\n" } @keys));
mc_is($s, "get @keys\r\n", join('', map { "VALUE $_ 0 " . length($_) . "\r\n$_\r\n" } @keys) . "END\r\n",
    'a 100-key get returns all 100 values');

# gets: a unique per item, stable while unchanged, new after a change.
mc_send($s, "gets a b\r\n");
my $r = mc_until($s, "END\r\n");
like($r, qr/^VALUE a 1 1 (\d+)\r\nA\r\nVALUE b 2 2 (\d+)\r\nBB\r\nEND\r\n\z/, 'gets shows a cas unique per item');
my ($ua, $ub) = $r =~ /^VALUE a 1 1 (\d+)\r\nA\r\nVALUE b 2 2 (\d+)\r\n/;
isnt($ua, $ub, 'different items have different cas uniques');
mc_send($s, "gets a\r\n");
my ($ua2) = mc_until($s, "END\r\n") =~ /^VALUE a 1 1 (\d+)\r\n/;
is($ua2, $ua, 'cas unique is stable while the item is unchanged');
mc_is($s, "set a 1 0 1\r\nA\r\n", "STORED\r\n", 'same value set again');
mc_send($s, "gets a\r\n");
my ($ua3) = mc_until($s, "END\r\n") =~ /^VALUE a 1 1 (\d+)\r\n/;
isnt($ua3, $ua, 'set gives a new cas unique even for the same value');

# touch
mc_is($s, "touch a 100\r\n", "TOUCHED\r\n", 'touch of an existing key');
mc_is($s, "touch nothing 100\r\n", "NOT_FOUND\r\n", 'touch of a missing key');
mc_is($s, "get a\r\n", "VALUE a 1 1\r\nA\r\nEND\r\n", 'touch keeps value and flags');
mc_send($s, "touch b 100 noreply\r\ntouch nothing 100 noreply\r\n");
ok(mc_silent($s, 0.3), 'touch noreply sends nothing');
mc_is($s, "touch b -1\r\n", "TOUCHED\r\n", 'touch with a negative exptime');
mc_is($s, "get b\r\n", "END\r\n", 'touched with a negative exptime: expired at once');

# gat / gats
mc_is($s, "gat 100 a c nothing\r\n", "VALUE a 1 1\r\nA\r\nVALUE c 3 3\r\nCCC\r\nEND\r\n",
    'gat returns the hits like get');
mc_send($s, "gats 100 c\r\n");
$r = mc_until($s, "END\r\n");
like($r, qr/^VALUE c 3 3 \d+\r\nCCC\r\nEND\r\n\z/, 'gats returns the hits with a cas unique');
mc_send($s, "gets c\r\n");
my ($uc1) = mc_until($s, "END\r\n") =~ /^VALUE c 3 3 (\d+)\r\n/;
my ($uc2) = $r =~ /^VALUE c 3 3 (\d+)\r\n/;
is($uc2, $uc1, 'gats shows the same unique as gets');
mc_is($s, "gat 100 nothing\r\n", "END\r\n", 'gat of a missing key is just END');
mc_is($s, "gat -1 c\r\n", "VALUE c 3 3\r\nCCC\r\nEND\r\n", 'gat with a negative exptime still returns the value');
mc_is($s, "get c\r\n", "END\r\n", '... and the item is expired afterwards');

# delete
mc_is($s, "delete a\r\n", "DELETED\r\n", 'delete of an existing key');
mc_is($s, "get a\r\n", "END\r\n", 'deleted key is gone');
mc_is($s, "delete a\r\n", "NOT_FOUND\r\n", 'delete of a missing key');
mc_is($s, "set d 0 0 1\r\nD\r\n", "STORED\r\n", 'set for delete noreply');
mc_send($s, "delete d noreply\r\ndelete d noreply\r\n");
ok(mc_silent($s, 0.3), 'delete noreply sends nothing');
mc_is($s, "get d\r\n", "END\r\n", 'delete noreply deleted');
mc_is($s, "add a 0 0 2\r\nA2\r\n", "STORED\r\n", 'add succeeds after delete');
mc_is($s, "delete a 0\r\n", "DELETED\r\n", 'delete with a legacy time of 0 is accepted');

# bget: memcached's undocumented old name for get
mc_is($s, "set bg 0 0 2\r\nBG\r\n", "STORED\r\n", 'set for bget');
my $gets_before = mc_stats($s)->{cmd_get};
mc_is($s, "bget bg\r\n", "VALUE bg 0 2\r\nBG\r\nEND\r\n", 'bget answers as get');
mc_is($s, "bget bg nope bg\r\n", "VALUE bg 0 2\r\nBG\r\nVALUE bg 0 2\r\nBG\r\nEND\r\n",
      'bget of several keys answers as get');
mc_is($s, "bget\r\n", "ERROR\r\n", 'bget without a key is ERROR');
is(mc_stats($s)->{cmd_get} - $gets_before, 4, 'bget keys count in cmd_get');

my $st = mc_stats($s);
ok($st->{delete_hits} >= 3 && $st->{delete_misses} >= 2,
    "delete_hits/delete_misses count ($st->{delete_hits}/$st->{delete_misses})");
ok($st->{touch_hits} >= 3 && $st->{touch_misses} >= 2,
    "touch_hits/touch_misses count ($st->{touch_hits}/$st->{touch_misses})");
ok($st->{cmd_touch} >= 5, "cmd_touch counts touch and gat keys ($st->{cmd_touch})");

close $s;
$srv->stop;
done_testing;
