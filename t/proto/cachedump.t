#!/usr/bin/perl
# t/proto/cachedump.t: "stats cachedump <class> <limit>" lists the keys of a
# slab class with their value length and expiry, as memcached 1.6 does.
use strict;
use warnings;
use Test::More;
use MCTest;

# memcached's LRU maintainer moves items out of the segment cachedump walks
my $srv = start_server('-m', '64', '-o', 'no_lru_maintainer');
my $s = $srv->connect;

mc_is($s, "set alpha 0 0 5\r\nhello\r\n", "STORED\r\n", 'set alpha');
mc_is($s, "set beta 0 0 4\r\nbyte\r\n", "STORED\r\n", 'set beta');
my $exp_at = time() + 1000;
mc_is($s, "set gamma 0 1000 3\r\nabc\r\n", "STORED\r\n", 'set gamma with a ttl');

mc_send($s, "stats items\r\n");
my $items = mc_until($s, "END\r\n");
my %classes = map { $_ => 1 } ($items =~ /^STAT items:(\d+):number \d+\r$/mg);
ok(%classes, 'stats items names the classes holding the keys');

my %seen;
for my $class (sort { $a <=> $b } keys %classes) {
    mc_send($s, "stats cachedump $class 100\r\n");
    my $dump = mc_until($s, "END\r\n");
    for my $line (split /\r\n/, $dump) {
        next if $line eq 'END';
        like($line, qr/^ITEM \S+ \[\d+ b; \d+ s\]\z/, "class $class: line shape '$line'");
        my ($key, $len, $exp) = $line =~ /^ITEM (\S+) \[(\d+) b; (\d+) s\]/ or next;
        $seen{$key} = [$len, $exp];
    }
}
is_deeply([sort keys %seen], [qw(alpha beta gamma)], 'every stored key is listed once');
is($seen{alpha}[0], 5, 'alpha: value length');
is($seen{beta}[0], 4, 'beta: value length');
cmp_ok(abs($seen{gamma}[1] - $exp_at), '<=', 3, 'gamma: expiry as a unix time');

my ($one) = sort { $a <=> $b } keys %classes;
mc_send($s, "stats cachedump $one 1\r\n");
my @lines = grep { $_ ne 'END' } split /\r\n/, mc_until($s, "END\r\n");
is(scalar @lines, 1, 'the limit bounds the listing');

mc_send($s, "stats cachedump 200 10\r\n");
like(mc_line($s), qr/^CLIENT_ERROR /, 'a class that does not exist is a CLIENT_ERROR');
mc_is($s, "get alpha\r\n", "VALUE alpha 0 5\r\nhello\r\nEND\r\n",
      'the connection keeps serving');

close $s;
$srv->stop;

# -X: the dump commands are refused, everything else is served
my $nodump = start_server('-m', '64', '-X');
my $x = $nodump->connect;
mc_is($x, "set alpha 0 0 5\r\nhello\r\n", "STORED\r\n", '-X: set');
mc_is($x, "stats cachedump 1 10\r\n", "CLIENT_ERROR stats cachedump not allowed\r\n",
      '-X: stats cachedump is not allowed');
mc_is($x, "lru_crawler metadump all\r\n", "ERROR metadump not allowed\r\n",
      '-X: lru_crawler metadump is not allowed');
mc_is($x, "get alpha\r\n", "VALUE alpha 0 5\r\nhello\r\nEND\r\n", '-X: the connection keeps serving');
close $x;
$nodump->stop;
done_testing();
