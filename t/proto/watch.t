#!/usr/bin/perl
# t/proto/watch.t: the lines "watch" streams, field by field as memcached
# 1.6 writes them: item_get (fetchers) and item_store (mutations) for the
# text and meta commands, eviction lines (evictions), and conn_new and
# conn_close (connevents). memcached also
# logs the lookups its stores make inside; the checks look for the lines
# of the commands sent and ignore others.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../lib";
use IO::Socket::IP;
use MCTest;
use MCBinary;

# Reads watch lines until one names $key (or 5 s pass); returns them all.
sub lines_until_key {
    my ($w, $key) = @_;
    my @lines;
    while (length(my $line = mc_line($w, 5))) {    # '' when the time is up
        chomp $line;
        push @lines, $line;
        last if $line =~ /\bkey=\Q$key\E\b/;
    }
    return @lines;
}

my $srv = start_server('-m', '8');
my $s = $srv->connect;

# fetchers and mutations
{
    my $w = $srv->connect;
    mc_is($w, "watch fetchers mutations\r\n", "OK\r\n", 'watch fetchers mutations');
    mc_is($s, "set wt 0 100 1\r\nx\r\n", "STORED\r\n", 'set with a TTL');
    mc_is($s, "ms wm 1 T50\r\ny\r\n", "HD\r\n", 'ms with a TTL');
    mc_is($s, "set wz 0 0 2\r\nzz\r\n", "STORED\r\n", 'set without a TTL');
    mc_is($s, "add wt 0 0 1\r\nz\r\n", "NOT_STORED\r\n", 'add of an existing key');
    mc_is($s, "append wt 0 0 2\r\nab\r\n", "STORED\r\n", 'append to the key with a TTL');
    mc_is($s, "mg wm v\r\n", "VA 1\r\ny\r\n", 'mg of a key');
    mc_is($s, "get nosuchkey\r\n", "END\r\n", 'get of a missing key');
    mc_is($s, "mg endmark\r\n", "EN\r\n", 'mg of the end marker');
    my @lines = lines_until_key($w, 'endmark');
    like($_, qr/^ts=\d+\.\d+ gid=\d+ type=\S+ /, "line shape: $_") for @lines;
    my @stores = grep { /type=item_store/ } @lines;
    is(scalar @stores, 5, 'one item_store line per store') or diag(join "\n", @lines);
    like($stores[0] // '', qr/ type=item_store key=wt status=stored cmd=set ttl=(99|100) clsid=[1-9]\d* cfd=\d+ size=1$/,
        'set: key, status, cmd, the TTL left, class, size');
    like($stores[1] // '', qr/ type=item_store key=wm status=stored cmd=set ttl=(49|50) clsid=[1-9]\d* cfd=\d+ size=1$/,
        'ms: logged as a set');
    like($stores[2] // '', qr/ type=item_store key=wz status=stored cmd=set ttl=0 clsid=[1-9]\d* cfd=\d+ size=2$/,
        'no TTL: ttl=0');
    like($stores[3] // '', qr/ type=item_store key=wt status=not_stored cmd=add ttl=0 clsid=[1-9]\d* cfd=\d+ size=1$/,
        'add over an existing key: not_stored');
    like($stores[4] // '', qr/ type=item_store key=wt status=stored cmd=append ttl=(9\d|100) clsid=[1-9]\d* cfd=\d+ size=3$/,
        'append: the joined item (its TTL, 3 bytes)');
    ok((grep { / type=item_get key=wm status=found clsid=[1-9]\d* cfd=\d+ size=1$/ } @lines),
        'mg: an item_get line, found, with its class and size');
    ok((grep { / type=item_get key=nosuchkey status=not_found clsid=0 cfd=\d+ size=0$/ } @lines),
        'get of a missing key: not_found, class 0, size 0');
    # a store looks its key up first, and memcached logs that lookup
    my ($wz) = grep { / key=wz / } @lines;
    like($wz // '', qr/ type=item_get key=wz status=not_found clsid=0 cfd=\d+ size=0$/,
        'set of a new key: an item_get not_found line before its item_store');
    my @wt = grep { / key=wt / } @lines;
    like($wt[2] // '', qr/ type=item_get key=wt status=found clsid=[1-9]\d* cfd=\d+ size=1$/,
        'add over an existing key: an item_get found line first') or diag(join "\n", @wt);
    close $w;
}

# the longest key, URI-encoded: 250 '#' are 750 characters
{
    my $w = $srv->connect;
    mc_is($w, "watch mutations\r\n", "OK\r\n", 'watch mutations');
    my $key = '#' x 250;
    mc_is($s, "set $key 0 0 1\r\nx\r\n", "STORED\r\n", 'set a 250-byte key');
    my $line = mc_line($w, 5);
    like($line, qr/ key=(?:%23){250} /, 'the whole key is logged, every byte encoded');
    close $w;
}

# the binary protocol (what RDMA clients speak) is logged the same way
{
    my $w = $srv->connect;
    mc_is($w, "watch fetchers mutations\r\n", "OK\r\n", 'watch fetchers mutations (binary)');
    my $b = $srv->connect;
    my $r = bin_call($b, bin_req($OP{set}, key => 'bw', extras => ext_store(0, 0), value => 'vv'));
    is($r && $r->{status}, $ST{success}, 'binary set');
    $r = bin_call($b, bin_req($OP{get}, key => 'bw'));
    is($r && $r->{value}, 'vv', 'binary get');
    $r = bin_call($b, bin_req($OP{get}, key => 'bwend'));
    is($r && $r->{status}, $ST{key_enoent}, 'binary get of the end marker');
    my @lines = lines_until_key($w, 'bwend');
    ok((grep { / type=item_store key=bw status=stored cmd=set ttl=0 clsid=[1-9]\d* cfd=\d+ size=2$/ } @lines),
        'binary set: an item_store line') or diag(join "\n", @lines);
    ok((grep { / type=item_get key=bw status=found clsid=[1-9]\d* cfd=\d+ size=2$/ } @lines),
        'binary get: an item_get line');
    close $b;
    close $w;
}

# evictions
{
    my $w = $srv->connect;
    mc_is($w, "watch evictions\r\n", "OK\r\n", 'watch evictions');
    my $value = 'e' x 100000;
    mc_send($s, join('', map { "set ev$_ 0 " . ($_ % 2 ? 0 : 1000) . " 100000 noreply\r\n$value\r\n" } 0 .. 119));
    mc_is($s, "mn\r\n", "MN\r\n", '12 MB of values into 8 MB');
    my @ev;
    while (length(my $line = mc_line($w, 2))) {
        chomp $line;
        push @ev, $line;
        last if @ev >= 6;
    }
    cmp_ok(scalar @ev, '>=', 2, 'evictions are streamed');
    ok((grep { /^ts=\d+\.\d+ gid=\d+ type=eviction key=ev\d*[02468] fetch=no ttl=(99\d|1000) la=\d+ clsid=[1-9]\d* size=100000$/ } @ev),
        'an item with a TTL: key, never fetched, the TTL it had left, idle time, class, size')
      or diag(join "\n", @ev);
    ok((grep { / type=eviction key=ev\d*[13579] fetch=no ttl=-1 la=\d+ clsid=[1-9]\d* size=100000$/ } @ev),
        'an item without a TTL: ttl=-1');
    close $w;
}
# a watcher that does not read: lines are skipped, not queued without
# bound, and once it reads again a "skipped=N" line says how many
{
    # more lines than the socket buffers between server and watcher hold:
    # the server's send buffer grows up to tcp_wmem's largest; a receive
    # buffer nobody reads from stays at tcp_rmem's default
    my @wmem = split ' ', slurp('/proc/sys/net/ipv4/tcp_wmem');
    my @rmem = split ' ', slurp('/proc/sys/net/ipv4/tcp_rmem');
    my $buffered = ($wmem[2] // 4194304) + ($rmem[1] // 131072);
    my $batches = int(3 * $buffered / 90 / 10000) + 1;    # lines of about 90 bytes
    $batches = 20 if $batches < 20;
  SKIP: {
        skip "socket buffers of $buffered bytes: too many lines to send", 3 if $batches > 100;
        my $w = $srv->connect;
        mc_is($w, "watch fetchers\r\n", "OK\r\n", 'a watcher that will not read');
        for my $batch (1 .. $batches) {
            mc_send($s, join('', map { "get nothere$_\r\n" } 1 .. 10000));
            my $got = mc_bytes($s, 5 * 10000, 30);
            is(length $got, 5 * 10000, "batch $batch of 10,000 gets answered") or last;
        }
        my $st = mc_stats($s);
        cmp_ok($st->{log_watcher_skipped}, '>', 0,
            "lines skipped ($st->{log_watcher_skipped} of " . $batches * 10000 . ")");
        my ($told, $drained) = (0, '');
        for (1 .. 200) {    # drain the watcher (a "skipped=N" line comes once it has room)
            my $got = mc_bytes($w, 1 << 30, 0.3);
            last unless length $got;
            $drained .= $got;
        }
        $told = 1 if $drained =~ /^skipped=\d+$/m;
        mc_send($s, "get afterskip\r\n");
        mc_bytes($s, 5);
        while (length(my $line = mc_line($w, 3))) {
            $told = 1 if $line =~ /^skipped=\d+\n\z/;
            last if $line =~ /key=afterskip /;
        }
        ok($told, 'the watcher is told how many lines it missed (skipped=N)');
        close $w;
    }
}
mc_is($s, "get ev119\r\n", "VALUE ev119 0 100000\r\n" . ('e' x 100000) . "\r\nEND\r\n", 'the newest value is served');

close $s;
$srv->stop;

# connevents: a line when a connection opens and one when it closes, with
# why; a watcher is no idle connection
{
    my $idle = start_server('-o', 'idle_timeout=1');
    my $w = $idle->connect;
    mc_is($w, "watch connevents\r\n", "OK\r\n", 'watch connevents');
    my %port;
    my $c = $idle->connect;
    $port{normal} = $c->sockport;
    mc_send($c, "version\r\n");
    like(mc_line($c), qr/^VERSION /, 'a connection that closes itself');
    close $c;
    $c = $idle->connect;
    $port{quit} = $c->sockport;
    mc_send($c, "quit\r\n");
    ok(mc_eof($c), 'a connection that quits');
    close $c;
    $c = $idle->connect;
    $port{error} = $c->sockport;
    mc_send($c, 'x' x 5000);
    ok(mc_eof($c), 'a connection closed for a line without an end');
    close $c;
    $c = $idle->connect;
    $port{idle} = $c->sockport;
    ok(mc_eof($c, 5), 'an idle connection is closed after idle_timeout');
    my @lines;
    while (length(my $line = mc_line($w, 3))) {
        chomp $line;
        push @lines, $line;
        last if $line =~ /type=conn_close .*rport=$port{idle} /;
    }
    for my $case (['normal', 'normal'], ['quit', 'normal'], ['error', 'error'], ['idle', 'idle_timeout']) {
        my ($name, $reason) = @$case;
        ok((grep { /^ts=\d+\.\d+ gid=\d+ type=conn_new rip=127\.0\.0\.1 rport=$port{$name} transport=tcp cfd=\d+$/ } @lines),
            "$name: conn_new with the peer's address and port");
        ok((grep { / type=conn_close rip=127\.0\.0\.1 rport=$port{$name} transport=tcp reason=$reason cfd=\d+$/ } @lines),
            "$name: conn_close, reason=$reason") or diag(join "\n", @lines);
    }
    close $w;
    $idle->stop;
}

# an IPv6 peer: its address without brackets
SKIP: {
    my $probe = IO::Socket::IP->new(LocalHost => '::1', LocalPort => 0, Listen => 1);
    skip 'no IPv6 loopback here', 2 unless $probe;
    close $probe;
    my $six = start_server('-l', '[::1]');
    my $w = $six->connect;
    mc_is($w, "watch connevents\r\n", "OK\r\n", 'watch connevents (IPv4 watcher)');
    my $c = IO::Socket::IP->new(PeerHost => '::1', PeerPort => $six->port) or die "connect [::1]: $!";
    my $port = $c->sockport;
    close $c;
    my @lines;
    while (length(my $line = mc_line($w, 3))) {
        chomp $line;
        push @lines, $line;
        last if $line =~ /type=conn_close .*rport=$port /;
    }
    ok((grep { / type=conn_new rip=::1 rport=$port transport=tcp cfd=\d+$/ } @lines),
        'an IPv6 peer: rip=::1 and its port') or diag(join "\n", @lines);
    close $w;
    $six->stop;
}
done_testing;
