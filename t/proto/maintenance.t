#!/usr/bin/perl
# t/proto/maintenance.t: the tuning and inspection commands documented in
# memcached's protocol.txt: slabs reassign/automove, lru tune/mode/temp_ttl,
# lru_crawler (sleep, tocrawl, crawl, metadump, enable/disable), watch, and
# stats sizes_enable/sizes_disable. Replies that carry a message are checked
# by their documented keyword.
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server('-m', '64');
my $s = $srv->connect;
mc_is($s, "set m1 0 0 2\r\nv1\r\nset m2 0 0 2\r\nv2\r\n", "STORED\r\nSTORED\r\n", 'two items to inspect');

# slabs
mc_is($s, "slabs automove 0\r\n", "OK\r\n", 'slabs automove 0');
mc_is($s, "slabs automove 1\r\n", "OK\r\n", 'slabs automove 1');
mc_is($s, "slabs automove 2\r\n", "OK\r\n", 'slabs automove 2');
mc_is($s, "slabs automove 1\r\n", "OK\r\n", 'slabs automove back to 1');
mc_send($s, "slabs reassign 1 1\r\n");
like(mc_line($s), qr/^SAME( [^\r\n]*)?\r\n\z/, 'slabs reassign to the same class is SAME');
mc_send($s, "slabs reassign 9999 1\r\n");
like(mc_line($s), qr/^BADCLASS( [^\r\n]*)?\r\n\z/, 'slabs reassign from a class that does not exist is BADCLASS');
# class 0 is the global page pool; a fresh server has no page to spare anywhere
mc_send($s, "slabs reassign 0 2\r\n");
like(mc_line($s), qr/^NOSPARE( [^\r\n]*)?\r\n\z/, 'slabs reassign from the empty page pool (class 0) is NOSPARE');
mc_send($s, "slabs reassign 2 0\r\n");
like(mc_line($s), qr/^NOSPARE( [^\r\n]*)?\r\n\z/, 'slabs reassign to the page pool from a class without pages is NOSPARE');
mc_send($s, "slabs reassign -1 2\r\n");
like(mc_line($s), qr/^BADCLASS( [^\r\n]*)?\r\n\z/, 'slabs reassign -1 with no class to pick from is BADCLASS');
mc_send($s, "slabs reassign 1 -2\r\n");
like(mc_line($s), qr/^BADCLASS( [^\r\n]*)?\r\n\z/, 'slabs reassign to class -2 is BADCLASS');
# last: the moves they start keep later requests BUSY for a while
{   # a class with three pages gives one to another class, then one to the pool
    my $big = $srv->connect;
    my $value = 'v' x 1000;
    mc_send($big, join('', map { "set fill$_ 0 0 1000 noreply\r\n$value\r\n" } 1 .. 2500));
    mc_is($big, "mn\r\n", "MN\r\n", '2500 values of 1000 bytes stored');
    my $pages = sub {
        my $slabs = mc_stats($big, 'slabs');
        return { map { /^(\d+):total_pages$/ ? ($1 => $slabs->{$_}) : () } keys %$slabs };
    };
    my $before = $pages->();
    my ($cls) = sort { $a <=> $b } grep { $before->{$_} >= 3 } keys %$before;
    ok(defined $cls, 'a class holds three pages or more');
    $cls //= 1;
    my ($small) = sort { $a <=> $b } grep { $_ != $cls } keys %$before;
    ok(defined $small && $before->{$small} == 1, 'the small item\'s class holds one page');
    $small //= 1;
    mc_send($s, "slabs reassign $cls $small\r\n");
    is(mc_line($s), "OK\r\n", 'slabs reassign from that class to the small one is OK');
    my $after;
    for (1 .. 100) {    # the page moves in the background
        $after = $pages->();
        last if ($after->{$small} // 0) > $before->{$small};
        select(undef, undef, undef, 0.05);
    }
    is($after->{$small}, $before->{$small} + 1, 'the destination class got the page');
    is($after->{$cls}, ($before->{$cls} // 0) - 1, 'the source class gave it up');
    my $line;
    for (1 .. 100) {    # memcached may still answer BUSY right after a move
        mc_send($s, "slabs reassign $cls 0\r\n");
        $line = mc_line($s);
        last unless $line =~ /^BUSY/;
        select(undef, undef, undef, 0.05);
    }
    is($line, "OK\r\n", 'slabs reassign from that class to the page pool (class 0) is OK');
}

# lru
mc_is($s, "lru tune 10 25 0.1 2.0\r\n", "OK\r\n", 'lru tune');
mc_is($s, "lru mode flat\r\n", "OK\r\n", 'lru mode flat');
mc_is($s, "lru mode segmented\r\n", "OK\r\n", 'lru mode segmented');
mc_is($s, "lru temp_ttl 10\r\n", "OK\r\n", 'lru temp_ttl');
mc_send($s, "lru bogus\r\n");
like(mc_line($s), qr/^ERROR( [^\r\n]*)?\r\n\z/, 'lru with an unknown setting is ERROR');

# lru_crawler
mc_is($s, "lru_crawler sleep 100\r\n", "OK\r\n", 'lru_crawler sleep');
mc_is($s, "lru_crawler tocrawl 0\r\n", "OK\r\n", 'lru_crawler tocrawl');
mc_send($s, "lru_crawler sleep x\r\n");
like(mc_line($s), qr/^CLIENT_ERROR [^\r\n]*\r\n\z/, 'lru_crawler sleep with a non-number is CLIENT_ERROR');
mc_send($s, "lru_crawler crawl all\r\n");
like(mc_line($s), qr/^(OK|BUSY [^\r\n]*)\r\n\z/, 'lru_crawler crawl all starts (or is busy)');
mc_send($s, "lru_crawler crawl 9999\r\n");
like(mc_line($s), qr/^(BADCLASS|BUSY)( [^\r\n]*)?\r\n\z/, 'lru_crawler crawl of a class that does not exist is BADCLASS');

# metadump: one "key=... exp=... la=... cas=... fetch=..." line per item, then END
my $dump;
for (1 .. 50) {    # the crawler may still be busy with the crawl above
    mc_send($s, "lru_crawler metadump all\r\n");
    my $first = mc_line($s);
    if ($first =~ /^BUSY/) { select(undef, undef, undef, 0.1); next }
    $dump = $first eq "END\r\n" ? $first : $first . mc_until($s, "END\r\n");
    last;
}
ok(defined $dump, 'lru_crawler metadump all answers');
$dump //= '';
for my $k (qw(m1 m2)) {
    like($dump, qr/^key=$k exp=-?\d+ la=\d+ cas=\d+ fetch=(yes|no)\b[^\n]*\n/m, "metadump lists $k with exp, la, cas and fetch");
}
like($dump, qr/END\r\n\z/, 'metadump ends with END');
mc_is($s, "get m1\r\n", "VALUE m1 0 2\r\nv1\r\nEND\r\n", 'the connection works after metadump');

# stats sizes toggles
mc_is($s, "stats sizes_enable\r\n", "STAT sizes_status enabled\r\n", 'stats sizes_enable');
mc_send($s, "stats sizes\r\n");
like(mc_until($s, "END\r\n"), qr/\A(STAT \d+ \d+\r\n)*END\r\n\z/, 'stats sizes lists <size> <count> when enabled');
mc_is($s, "stats sizes_disable\r\n", "STAT sizes_status disabled\r\n", 'stats sizes_disable');
mc_is($s, "stats sizes\r\n", "STAT sizes_status disabled\r\nEND\r\n", 'stats sizes when disabled');

# watch turns a connection into a log stream
my $w = $srv->connect;
mc_is($w, "watch mutations\r\n", "OK\r\n", 'watch mutations');
mc_is($s, "set watched 0 0 1\r\nx\r\n", "STORED\r\n", 'a mutation on another connection');
my $log = mc_line($w, 5);
like($log, qr/^ts=\S+ gid=\d+ .*key=watched/, 'the watcher receives a ts= gid= line for it');
close $w;
mc_is($s, "get watched\r\n", "VALUE watched 0 1\r\nx\r\nEND\r\n", 'server serves after the watcher left');

close $s;
$srv->stop;
done_testing;
