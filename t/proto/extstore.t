#!/usr/bin/perl
# extstore.t: values on flash (-o ext_path) with real files in a temporary
# directory. A data set about three times -m is stored; every key is read
# back byte-exact through text get, gets, mg and binary get, and multi-gets
# mix RAM and flash items. Then the file is overwritten under the server:
# reads give misses and badcrc_from_extstore, never wrong data, and the
# server keeps serving. Finally a file smaller than the data set drops its
# oldest pages: those keys miss, the rest read back exact.
use strict;
use warnings;
use Test::More;
use File::Temp ();
use MCTest;

my $dir = File::Temp::tempdir(CLEANUP => 1);
my $file = "$dir/flash";

sub value_of {
    my ($i) = @_;
    my $len = 1024 + ($i * 7919) % (15 * 1024);
    my $unit = sprintf('%08d|', $i);
    return substr($unit x (int($len / length($unit)) + 1), 0, $len);
}

sub fill {
    my ($s, $from, $to) = @_;
    for my $i ($from .. $to - 1) {
        my $v = value_of($i);
        mc_send($s, "set k$i $i 0 " . length($v) . " noreply\r\n$v\r\n");
        if ($i % 100 == 99) {    # pace: let the writer keep up
            mc_send($s, "mn\r\n");
            mc_line($s) eq "MN\r\n" or die 'lost sync while filling';
            select(undef, undef, undef, 0.02);
        }
    }
}

# "get k..." (or gets): hash of key => [flags, value]; dies on a bad reply
sub get_multi {
    my ($s, $cmd, @keys) = @_;
    mc_send($s, "$cmd @keys\r\n");
    my (%got, @order);
    while (1) {
        my $line = mc_line($s, 10);
        last if $line eq "END\r\n";
        $line =~ /^VALUE (\S+) (\d+) (\d+)(?: \d+)?\r\n\z/ or die "bad reply line: $line";
        my ($k, $f, $n) = ($1, $2, $3);
        my $data = mc_bytes($s, $n + 2, 10);
        $got{$k} = [$f, substr($data, 0, $n)];
        push @order, $k;
    }
    return (\%got, \@order);
}

# every key k0 .. k($N-1) by 50-key text multi-gets: (hits, wrong values
# or flags)
sub read_all {
    my ($s, $n) = @_;
    my ($hits, $wrong) = (0, 0);
    for (my $i = 0; $i < $n; $i += 50) {
        my ($got) = get_multi($s, 'get', map {"k$_"} $i .. $i + 49);
        for my $j ($i .. $i + 49) {
            next unless $got->{"k$j"};
            $hits++;
            $wrong++ if $got->{"k$j"}[1] ne value_of($j) || $got->{"k$j"}[0] != $j;
        }
    }
    return ($hits, $wrong);
}

sub bin_get {
    my ($s, $key) = @_;
    mc_send($s, pack('CCnCCnNNNN', 0x80, 0x00, length($key), 0, 0, 0, length($key), 7, 0, 0) . $key);
    my $h = mc_bytes($s, 24, 10);
    length($h) == 24 or die 'short binary header';
    my ($magic, $op, $klen, $elen, $dt, $status, $blen) = unpack('CCnCCnN', $h);
    my $body = mc_bytes($s, $blen, 10);
    return ($status, $status == 0 ? substr($body, $elen + $klen) : undef);
}

my $N = 12000;    # about 100 MB of values into -m 32
my $srv = start_server('-m', '32',
    '-o', "ext_page_size=8,ext_wbuf_size=2,ext_path=$file:256m,ext_item_age=0");
my $s = $srv->connect;
fill($s, 0, $N);
select(undef, undef, undef, 1);
my $st = mc_stats($s);
cmp_ok($st->{extstore_objects_written}, '>', $N / 2, 'most values were written to flash');
ok(-s $file > 32 * 1024 * 1024, 'the file holds more than -m');

my ($hits, $wrong) = read_all($s, $N);
is($wrong, 0, 'text multi-get: every value read back is byte-exact with its flags');
cmp_ok($hits, '>=', $N * 0.9, "text multi-get: at least 90% of $N keys hit ($hits)");
$st = mc_stats($s);
cmp_ok($st->{get_extstore}, '>', $N / 2, 'get_extstore counts the flash reads');
is($st->{badcrc_from_extstore}, 0, 'no checksum failures');

# gets, mg and binary get of flash items, one by one (a sample)
my ($gets_ok, $mg_ok, $bin_ok, $tried) = (0, 0, 0, 0);
my $b = $srv->connect;    # a connection speaks one protocol: binary here
for (my $i = 1; $i < $N; $i += 97) {
    my $v = value_of($i);
    my ($got) = get_multi($s, 'gets', "k$i");
    next unless $got->{"k$i"};
    $tried++;
    $gets_ok++ if $got->{"k$i"}[1] eq $v;
    mc_send($s, "mg k$i v f k\r\n");
    my $line = mc_line($s, 10);
    if ($line =~ /^VA (\d+) f(\d+) kk$i\r\n\z/ && $2 == $i) {
        my $data = mc_bytes($s, $1 + 2, 10);
        $mg_ok++ if $data eq "$v\r\n";
    }
    my ($status, $bv) = bin_get($b, "k$i");
    $bin_ok++ if $status == 0 && $bv eq $v;
}
cmp_ok($tried, '>', 50, 'a sample of stored keys');
is($gets_ok, $tried, 'gets: byte-exact');
is($mg_ok, $tried, 'mg v f k: byte-exact');
is($bin_ok, $tried, 'binary get: byte-exact');

# multi-get mixing fresh RAM items and flash items keeps request order
my @fresh = map {"fresh$_"} 1 .. 5;
mc_send($s, "set $_ 1 0 5 noreply\r\nhello\r\n") for @fresh;
my @keys = ('k3', $fresh[0], 'k17', 'k4001', $fresh[1], 'k9000', $fresh[2], 'k11999');
my ($got, $order) = get_multi($s, 'get', @keys);
my @expect = grep { $got->{$_} } @keys;
is_deeply($order, \@expect, 'mixed multi-get: replies in request order');
is($got->{$_}[1], 'hello', "mixed multi-get: RAM item $_") for @fresh[0 .. 2];
my $mixed_wrong = grep { /^k(\d+)$/ && $got->{$_} && $got->{$_}[1] ne value_of($1) } @keys;
is($mixed_wrong, 0, 'mixed multi-get: flash items byte-exact');

# corrupt the file under the server: misses and a counter, never wrong data.
# Debian's memcached 1.6.18 dies (SIGSEGV) on the second multi-get over such
# a file, so this part runs against this server only.
SKIP: {
    skip 'memcached 1.6.18 crashes on an overwritten extstore file', 5 if target() eq 'memcached';
    open(my $fh, '+<', $file) or die "open $file: $!";
    binmode $fh;
    my $junk = join('', map { chr(($_ * 131 + 7) % 256) } 0 .. 4095);
    for my $mb (0 .. 15) {
        seek($fh, $mb * 1024 * 1024, 0);
        print $fh $junk x 64;
    }
    close $fh;
    my ($chits, $cwrong) = read_all($s, $N);
    my $cmiss = $N - $chits;
    is($cwrong, 0, 'corrupted file: no wrong data');
    cmp_ok($cmiss, '>', 0, "corrupted file: corrupted values miss ($cmiss)");
    $st = mc_stats($s);
    cmp_ok($st->{badcrc_from_extstore}, '>', 0, 'corrupted file: badcrc_from_extstore counts them');
    mc_is($s, "set after 0 0 2\r\nok\r\n", "STORED\r\n", 'corrupted file: the server keeps serving');
    mc_is($s, "get after\r\n", "VALUE after 0 2\r\nok\r\nEND\r\n", 'and reads');
}
$srv->stop;

# a file smaller than the data: the oldest pages are dropped
unlink $file;
$srv = start_server('-m', '32',
    '-o', "ext_page_size=4,ext_wbuf_size=2,ext_path=$file:32m,ext_item_age=0");
$s = $srv->connect;
fill($s, 0, $N);
select(undef, undef, undef, 1);
my ($shits, $swrong) = read_all($s, $N);
$st = mc_stats($s);
cmp_ok($st->{extstore_page_evictions}, '>', 0, 'small file: pages were dropped');
# as memcached's extstore, the oldest page is dropped while one is still
# free, so a page is free whenever the writer opens one
cmp_ok($st->{extstore_pages_free}, '>=', 1, 'small file: a page is kept free');
is($swrong, 0, 'small file: no wrong data');
cmp_ok($shits, '<', $N, "small file: dropped values miss ($shits of $N hit)");
cmp_ok($shits, '>', $N / 5, 'small file: recent values still hit');
$srv->stop;

# other commands on flash items answer as memcached's extstore does
unlink $file;
$srv = start_server('-m', '16',
    '-o', "ext_page_size=8,ext_wbuf_size=2,ext_path=$file:64m,ext_item_age=0,ext_item_size=1,"
      . 'ext_recache_rate=0');    # a value read back stays on flash: the counts below hold
$s = $srv->connect;
my $big = 'a' x 2000;
mc_is($s, "set big 5 0 2000\r\n$big\r\n", "STORED\r\n", 'a value for flash');
mc_is($s, "set num 0 0 600\r\n1" . (' ' x 599) . "\r\n", "STORED\r\n", 'a number for flash');
mc_send($s, "set f$_ 0 0 2000 noreply\r\n$big\r\n") for 1 .. 50;
my $deadline = time + 10;
sleep 0.2 while mc_stats($s)->{extstore_objects_written} < 52 && time < $deadline;
is(mc_stats($s)->{extstore_objects_written}, 52, 'every value went to flash');
mc_is($s, "append big 0 0 1\r\nz\r\n", "NOT_STORED\r\n", 'append on a flash item: NOT_STORED');
mc_is($s, "prepend big 0 0 1\r\nz\r\n", "NOT_STORED\r\n", 'prepend on a flash item: NOT_STORED');
mc_is($s, "incr num 1\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    'incr on a flash item: non-numeric');
mc_is($s, "gat 100 big\r\n", "VALUE big 5 2000\r\n$big\r\nEND\r\n", 'gat reads it back');
mc_is($s, "touch big 10\r\n", "TOUCHED\r\n", 'touch');
mc_is($s, "mg big v t s\r\n", "VA 2000 t10 s2000\r\n$big\r\n", 'mg v t s');
my $ext = mc_stats($s, 'extstore');
ok(exists $ext->{"$_:version"} && exists $ext->{"$_:bytes"}, "stats extstore: page $_") for 0 .. 7;
my $gen = mc_stats($s);
ok(exists $gen->{$_}, "stats: $_") for qw(get_extstore get_aborted_extstore get_oom_extstore
  recache_from_extstore miss_from_extstore badcrc_from_extstore extstore_compact_lost
  extstore_compact_rescues extstore_compact_skipped extstore_page_allocs
  extstore_page_evictions extstore_page_reclaims extstore_pages_free extstore_pages_used
  extstore_objects_evicted extstore_objects_read extstore_objects_written
  extstore_objects_used extstore_bytes_evicted extstore_bytes_written extstore_bytes_read
  extstore_bytes_used extstore_bytes_fragmented extstore_limit_maxbytes extstore_io_queue);
is($gen->{extstore_limit_maxbytes}, 64 * 1024 * 1024, 'extstore_limit_maxbytes is the file size');
mc_is($s, "mg num v q\r\nmn\r\n", "VA 600\r\n1" . (' ' x 599) . "\r\nMN\r\n", 'mg v q');
my $used = mc_stats($s)->{extstore_objects_used};
mc_send($s, "delete f$_ noreply\r\n") for 1 .. 50;
mc_is($s, "mn\r\n", "MN\r\n", 'deleted 50 flash items');
# a background thread (LRU maintainer, writer) may hold a header for a
# moment: its record stops counting when the last reference goes
my $left = mc_stats($s)->{extstore_objects_used};
for (1 .. 20) {
    last if $left <= $used - 50;
    select(undef, undef, undef, 0.1);
    $left = mc_stats($s)->{extstore_objects_used};
}
cmp_ok($left, '<=', $used - 50, 'extstore_objects_used dropped by the deleted items');

# the extstore admin command, as memcached answers it
mc_is($s, "extstore $_\r\n", "OK\r\n", "extstore $_: OK")
  for 'item_size 100', 'item_age 5', 'low_ttl 3', 'recache_rate 10', 'compact_under 2',
  'drop_under 2', 'max_frag 0.5', 'drop_unread 1', 'free_memchunks 0 0';
mc_is($s, "extstore $_\r\n", "ERROR\r\n", "extstore $_: ERROR")
  for 'item_size', 'bogus 1', 'recache_rate x', 'low_ttl -1', 'free_memchunks 0';
my $set = mc_stats($s, 'settings');
my %want = (ext_item_size => 100, ext_item_age => 5, ext_low_ttl => 0, ext_recache_rate => 0,
    ext_compact_under => 2, ext_drop_under => 2, ext_max_frag => '0.50', ext_drop_unread => 'yes');
is($set->{$_}, $want{$_}, "stats settings $_ after the extstore commands") for sort keys %want;
$srv->stop;
done_testing();
