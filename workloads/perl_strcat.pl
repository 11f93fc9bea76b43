# perl-strcat: re-creates the profile of the perl malloc speed test in seed 000 (perl RT #122000,
# "Use OpenBSD's malloc by default"): strings of 1E5 to 1E7 characters grown by appending chunks
# of 1E1 to 1E5 characters, a string pre-extended to 2E7 then appended to, and an array of 1E5
# strings of 100 characters copied and pushed onto (the case that was 5x slower under OpenBSD's
# malloc). Pure Perl, core only, so any perl can run it.
# usage: perl perl_strcat.pl SCALE [CASE]      (prints checksum=<hex> last)
# With CASE (append-<base exponent>-<chunk exponent>, preextend or array) only that case of the seed's
# benchmark runs, REPEAT{CASE} times as many rounds, so that every case alone is a workload of its own.
use strict;
use warnings;

my ($scale, $only) = @ARGV;
die "usage: perl_strcat.pl SCALE [CASE]\n"
  unless defined $scale && $scale =~ /^(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/ && $scale > 0;
# (0.3-0.6 s a case at the quick profile's scale under glibc on this kind of machine)
my %REPEAT = ('append-5-2' => 96, 'append-6-2' => 96, 'append-7-2' => 24, 'append-7-1' => 6, 'append-7-3' => 32,
              'append-7-4' => 32, 'append-7-5' => 32, 'preextend' => 128, 'array' => 4);
die "unknown case '$only'; valid: " . join(', ', sort keys %REPEAT) . "\n"
  if defined $only && !exists $REPEAT{$only};
sub wanted { !defined $only || $only eq $_[0] }
# Scale 1 is 16 rounds. Below one round, every length and count shrinks by the scale instead, so
# slow debugging allocators can run a true fraction of the work (chunk sizes stay as they are).
my $work = 16 * $scale * (defined $only ? $REPEAT{$only} : 1);
my ($rounds, $fraction) = $work >= 1 ? (int($work + 0.5), 1) : (1, $work);
sub n { my $v = int($_[0] * $fraction + 0.5); $v < 1 ? 1 : $v }

my $pattern = join('', 'a' .. 'z') x 3900;
my %chunk = map { $_ => substr($pattern, $_, 10**$_) } 1 .. 5;


my @appends = ([5, 2, 1E4], [6, 2, 1E4], [7, 2, 1E4], [7, 1, 1E5], [7, 3, 1E3], [7, 4, 1E2],
               [7, 5, 1E1]);

my $h = 0;
sub mix { $h = ($h * 33 + $_[0]) % 4294967291 }

# [base length exponent, chunk length exponent, appends]: each appends 1E6 characters
# (a case alone sets up only what it uses: the others' big strings would dilute its allocations)
my @cases = grep { wanted("append-$_->[0]-$_->[1]") } @appends;
my %base  = map { $_ => substr($pattern, 0, 1) x n(10**$_) } sort { $a <=> $b } keys %{{ map { $_->[0] => 1 } @cases }};
my $pre = '';
if (wanted('preextend')) {
    $pre = substr($pattern, 0, 1) x n(2E7);
    substr($pre, n(1E7)) = '';   # length 1E7, buffer still sized for 2E7
}
my @array = wanted('array') ? map { substr($pattern, $_ % 26, 100) } 1 .. n(1E5) : ();

for my $round (1 .. $rounds) {
    for my $case (@cases) {
        my ($base_exp, $chunk_exp, $n) = @$case;
        my $str = $base{$base_exp};
        my $piece = $chunk{$chunk_exp};
        $str .= $piece for 1 .. n($n);
        mix(length $str);
        mix(ord substr($str, -1 - $round % 7, 1));
    }

    if (wanted('preextend')) {
        $pre .= $chunk{2} for 1 .. n(1E4);
        mix(length $pre);
        substr($pre, n(1E7)) = '';
    }
    next unless wanted('array');

    my @copy = @array;
    push @copy, $chunk{2} for 1 .. n(1E4);
    mix(scalar @copy);
    mix(ord substr($copy[($round * 7919) % @copy], 99, 1));
}
mix($rounds);
mix(n(1E7));
printf "checksum=%08x\n", $h;
